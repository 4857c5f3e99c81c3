package launcher

import (
	"fmt"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/cpuset"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// AffinityCPUs returns the host CPUs this process may run on, in
// ascending order: its CPU affinity, which the cpuset of its container's
// cgroup bounds (the kubelet's static CPU manager writes a Guaranteed
// container's exclusive CPUs there before the container starts).
func AffinityCPUs() ([]uint, error) { return cpuset.Affinity() }

// HostNUMANodes reads the NUMA node of each host CPU from
// /sys/devices/system/node/node<N>/cpulist. A kernel without NUMA (no
// such directory) yields an empty map: every CPU on node 0.
func HostNUMANodes() (map[uint]uint, error) { return cpuset.HostNUMANodes() }

// dedicatedCPUs returns the host CPUs a guest with dedicated CPU placement
// is pinned to (domainxml.Options.CPUSet), nil for any other guest.
// domainxml checks there are enough of them for the vCPUs and the
// emulator thread.
func (l *Launcher) dedicatedCPUs(vmi *v1.VirtualMachineInstance) ([]uint, error) {
	if cpu := vmi.Spec.Domain.CPU; cpu == nil || !cpu.DedicatedCPUPlacement {
		return nil, nil
	}
	read := l.cfg.CPUSet
	if read == nil {
		read = AffinityCPUs
	}
	cpus, err := read()
	if err != nil {
		return nil, fmt.Errorf("spec.domain.cpu.dedicatedCpuPlacement: %w", err)
	}
	return cpus, nil
}
