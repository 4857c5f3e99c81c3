package launcher

import (
	"fmt"

	"golang.org/x/sys/unix"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// AffinityCPUs returns the host CPUs this process may run on, in
// ascending order: its CPU affinity, which the cpuset of its container's
// cgroup bounds (the kubelet's static CPU manager writes a Guaranteed
// container's exclusive CPUs there before the container starts).
func AffinityCPUs() ([]uint, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading this process's CPU affinity: %w", err)
	}
	var cpus []uint
	for i := range uint(len(set) * 64) {
		if set.IsSet(int(i)) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

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
