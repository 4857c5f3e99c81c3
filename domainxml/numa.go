package domainxml

import (
	"fmt"
	"slices"
	"strconv"

	"libvirt.org/go/libvirtxml"
)

// numaField is the field of KubeVirt's guest NUMA passthrough.
const numaField = "spec.domain.cpu.numa.guestMappingPassthrough"

// convertNUMA mirrors in the guest the host NUMA node of the CPUs its vCPUs
// are pinned to (spec.domain.cpu.numa.guestMappingPassthrough), as KubeVirt
// does: it needs dedicated CPUs (the host CPUs decide the cells) and huge
// pages (KubeVirt binds the memory to the host nodes). vmkit builds one
// guest cell: every vCPU and all the memory, for the one host node of the
// pinned CPUs. vCPUs pinned across several host nodes, which KubeVirt
// splits into one cell per node with the memory bound to each, are
// reported as unsupported by name.
func (c *converter) convertNUMA() error {
	cpu := c.spec.CPU
	if cpu == nil || cpu.NUMA == nil || cpu.NUMA.GuestMappingPassthrough == nil {
		return nil
	}
	if !cpu.DedicatedCPUPlacement {
		return fieldErrorf(numaField, "needs spec.domain.cpu.dedicatedCpuPlacement: the guest's NUMA cell follows the host CPUs its vCPUs are pinned to")
	}
	if c.dom.MemoryBacking == nil || c.dom.MemoryBacking.MemoryHugePages == nil {
		return fieldErrorf(numaField, "needs spec.domain.memory.hugepages, as KubeVirt's")
	}
	if c.dom.CPUTune == nil || len(c.dom.CPUTune.VCPUPin) == 0 {
		return fieldErrorf(numaField, "needs the vCPUs pinned (Options.CPUSet)")
	}
	var nodes []uint
	for _, pin := range c.dom.CPUTune.VCPUPin {
		host, err := strconv.ParseUint(pin.CPUSet, 10, 32)
		if err != nil {
			return fieldErrorf(numaField, "vCPU %d is pinned to %q, not one host CPU", pin.VCPU, pin.CPUSet)
		}
		node := c.opts.HostNUMANodes[uint(host)] // none known: node 0
		if !slices.Contains(nodes, node) {
			nodes = append(nodes, node)
		}
	}
	if len(nodes) > 1 {
		slices.Sort(nodes)
		return unsupportedf(numaField, "spread a guest over host NUMA nodes %v (its vCPUs are pinned to CPUs of each): vmkit mirrors one host NUMA node", nodes)
	}
	id := uint(0)
	// The cell holds every vCPU the guest may have (maxSockets included),
	// as libvirt requires.
	cpus := "0"
	if n := c.dom.VCPU.Value; n > 1 {
		cpus = fmt.Sprintf("0-%d", n-1)
	}
	if c.dom.CPU == nil {
		c.dom.CPU = &libvirtxml.DomainCPU{}
	}
	c.dom.CPU.Numa = &libvirtxml.DomainNuma{Cell: []libvirtxml.DomainCell{{ID: &id, CPUs: cpus, Memory: c.dom.Memory.Value, Unit: c.dom.Memory.Unit}}}
	// No <numatune>: on one host node there is nowhere else for the
	// memory to be, and binding it (QEMU's mbind) needs CAP_SYS_NICE,
	// which the runtime's seccomp profile asks of a non-root launcher.
	return nil
}
