package domainxml

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
)

// maxVCPUs bounds the vCPU count; QEMU's q35 machine stops at 288 with KVM
// and libvirt's own ceiling is far above anything a pod can hold.
const maxVCPUs = 512

// convertCPU sets the vCPU count and sockets × cores × threads topology, the
// CPU model and features, and pins vCPUs to host CPUs when placement is
// dedicated.
func (c *converter) convertCPU() error {
	cpu := c.spec.CPU
	sockets, cores, threads := uint64(1), uint64(1), uint64(1)
	if cpu != nil && (cpu.Sockets != 0 || cpu.Cores != 0 || cpu.Threads != 0) {
		sockets, cores, threads = orOne(cpu.Sockets), orOne(cpu.Cores), orOne(cpu.Threads)
	} else if n := cpuResourceCount(c.spec.Resources.Limits, c.spec.Resources.Requests); n > 0 {
		sockets = n
	}
	vcpus := sockets * cores * threads // each is at most 2^32: no overflow below
	if sockets > maxVCPUs || cores > maxVCPUs || threads > maxVCPUs || vcpus > maxVCPUs {
		return fieldErrorf("spec.domain.cpu", "%d sockets × %d cores × %d threads = %d vCPUs, more than the supported %d", sockets, cores, threads, vcpus, maxVCPUs)
	}
	c.vcpus = uint(vcpus)
	vcpu := &libvirtxml.DomainVCPU{Placement: "static", Value: uint(vcpus)}
	if cpu != nil && cpu.MaxSockets != 0 {
		if uint64(cpu.MaxSockets) < sockets {
			return fieldErrorf("spec.domain.cpu.maxSockets", "%d is less than sockets (%d)", cpu.MaxSockets, sockets)
		}
		maxVCPU := uint64(cpu.MaxSockets) * cores * threads // cores × threads ≤ 512
		if maxVCPU > maxVCPUs {
			return fieldErrorf("spec.domain.cpu.maxSockets", "%d sockets make %d vCPUs, more than the supported %d", cpu.MaxSockets, maxVCPU, maxVCPUs)
		}
		if maxVCPU != vcpus {
			vcpu.Value, vcpu.Current = uint(maxVCPU), uint(vcpus)
		}
		sockets = uint64(cpu.MaxSockets)
	}
	c.dom.VCPU = vcpu

	c.dom.CPU = &libvirtxml.DomainCPU{
		Topology: &libvirtxml.DomainCPUTopology{Sockets: int(sockets), Cores: int(cores), Threads: int(threads)},
	}
	if err := c.convertCPUModel(); err != nil {
		return err
	}
	if cpu == nil {
		return nil
	}
	if len(cpu.Features) > 0 {
		features := make([]libvirtxml.DomainCPUFeature, len(cpu.Features))
		for i, f := range cpu.Features {
			if !isCPUFeatureName(f.Name) {
				return fieldErrorf("spec.domain.cpu.features["+strconv.Itoa(i)+"].name", "invalid CPU feature name %q", f.Name)
			}
			policy := f.Policy
			switch policy {
			case "":
				policy = "require"
			case "force", "require", "optional", "disable", "forbid":
			default:
				return fieldErrorf("spec.domain.cpu.features["+strconv.Itoa(i)+"].policy", "unknown policy %q (want force, require, optional, disable or forbid)", f.Policy)
			}
			features[i] = libvirtxml.DomainCPUFeature{Name: f.Name, Policy: policy}
		}
		c.dom.CPU.Features = features
	}
	return c.convertCPUPinning()
}

// convertCPUModel picks the CPU mode and model: spec.domain.cpu.model, else
// Options.CPUModel, else the architecture's host mode. Under emulation the
// host modes, which need KVM, become "maximum": everything TCG emulates.
func (c *converter) convertCPUModel() error {
	model, field := "", "spec.domain.cpu.model"
	if cpu := c.spec.CPU; cpu != nil {
		model = cpu.Model
	}
	if model == "" {
		model, field = c.opts.CPUModel, "Options.CPUModel"
	}
	dc := c.dom.CPU
	switch {
	case c.opts.Emulation && (model == "" || model == "host-model" || model == "host-passthrough"):
		dc.Mode = "maximum"
	case model == "":
		dc.Mode = c.opts.arch.hostCPU
	case model == "host-model" || model == "host-passthrough":
		dc.Mode = model
	default:
		if !isCPUModelName(model) {
			return fieldErrorf(field, "invalid CPU model name %q", model)
		}
		dc.Mode = "custom"
		dc.Match = "exact"
		dc.Model = &libvirtxml.DomainCPUModel{Value: model}
	}
	return nil
}

// convertCPUPinning pins vCPU i to Options.CPUSet[i] for dedicated
// placement and, with isolateEmulatorThread, QEMU's emulator thread to the
// next host CPU.
func (c *converter) convertCPUPinning() error {
	cpu := c.spec.CPU
	if cpu.IsolateEmulatorThread && !cpu.DedicatedCPUPlacement {
		return fieldErrorf("spec.domain.cpu.isolateEmulatorThread", "needs dedicatedCpuPlacement")
	}
	if !cpu.DedicatedCPUPlacement {
		return nil
	}
	n := c.dom.VCPU.Value
	need := n
	if cpu.IsolateEmulatorThread {
		need++
	}
	if uint(len(c.opts.CPUSet)) < need {
		return fieldErrorf("spec.domain.cpu.dedicatedCpuPlacement", "needs %d dedicated host CPUs and has %d (%s): "+
			"the launcher pod gets CPUs of its own only from a kubelet with the static CPU manager policy, and only when its QoS class is Guaranteed",
			need, len(c.opts.CPUSet), formatCPUSet(c.opts.CPUSet))
	}
	tune := &libvirtxml.DomainCPUTune{VCPUPin: make([]libvirtxml.DomainCPUTuneVCPUPin, n)}
	for i := range tune.VCPUPin {
		tune.VCPUPin[i] = libvirtxml.DomainCPUTuneVCPUPin{VCPU: uint(i), CPUSet: strconv.FormatUint(uint64(c.opts.CPUSet[i]), 10)}
	}
	if cpu.IsolateEmulatorThread {
		tune.EmulatorPin = &libvirtxml.DomainCPUTuneEmulatorPin{CPUSet: strconv.FormatUint(uint64(c.opts.CPUSet[n]), 10)}
	}
	c.dom.CPUTune = tune
	return nil
}

// cpuResourceCount is the vCPU count implied by the CPU limit, else the
// request, rounded up to whole CPUs; 0 when neither is set.
func cpuResourceCount(limits, requests corev1.ResourceList) uint64 {
	q, ok := limits[corev1.ResourceCPU]
	if !ok {
		if q, ok = requests[corev1.ResourceCPU]; !ok {
			return 0
		}
	}
	milli := q.MilliValue()
	if milli <= 0 {
		return 0
	}
	n := uint64((milli + 999) / 1000)
	if n > maxVCPUs {
		return maxVCPUs + 1 // rejected by the caller with the count it computes
	}
	return n
}

func orOne(n uint32) uint64 {
	if n == 0 {
		return 1
	}
	return uint64(n)
}

// isCPUModelName reports whether s looks like a libvirt CPU model name
// (Skylake-Client-IBRS, EPYC-Rome, qemu64, ...).
func isCPUModelName(s string) bool {
	return isToken(s, 64, "-_.")
}

// isCPUFeatureName reports whether s looks like a libvirt CPU feature name
// (avx512f, pcid, sse4.2, ...).
func isCPUFeatureName(s string) bool {
	return isToken(s, 64, "-_.")
}

// isToken reports whether s is 1 to max letters, digits and bytes of extra.
func isToken(s string, max int, extra string) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !isAlnum(b) && strings.IndexByte(extra, b) < 0 {
			return false
		}
	}
	return true
}

// formatCPUSet lists host CPUs as a cpuset string ("0-3,6"; "none").
func formatCPUSet(cpus []uint) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprint(&b, cpus[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		}
		i = j + 1
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
