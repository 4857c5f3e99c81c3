package launcher

import (
	"context"
	"fmt"

	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// CPU hotplug (KubeVirt's LiveUpdate of spec.domain.cpu.sockets): a running
// VMI whose sockets grew (the VM controller writes them, up to maxSockets)
// gets the new vCPUs live; the status reports the topology the guest has.

// topologyOf is the CPU topology the VMI's spec asks for, nil when it names
// none (then nothing is hot-plugged).
func topologyOf(vmi *v1.VirtualMachineInstance) *v1.CPUTopology {
	cpu := vmi.Spec.Domain.CPU
	if cpu == nil || cpu.Sockets == 0 && cpu.Cores == 0 && cpu.Threads == 0 {
		return nil
	}
	return &v1.CPUTopology{Sockets: max(cpu.Sockets, 1), Cores: max(cpu.Cores, 1), Threads: max(cpu.Threads, 1)}
}

// vcpus is the number of vCPUs of a topology.
func vcpus(t *v1.CPUTopology) uint {
	return uint(t.Sockets) * uint(t.Cores) * uint(t.Threads)
}

// definedTopology is the topology the domain booted with: the spec's,
// with the sockets its <vcpu current=> gives.
func definedTopology(vmi *v1.VirtualMachineInstance, dom *libvirtxml.Domain) *v1.CPUTopology {
	t := topologyOf(vmi)
	if t == nil || dom == nil || dom.VCPU == nil || dom.VCPU.Current == 0 {
		return t
	}
	t.Sockets = uint32(dom.VCPU.Current / uint(t.Cores*t.Threads))
	return t
}

// hotplugCPUsLocked hot-plugs the vCPUs of the sockets the VMI's spec adds
// to the running domain, within its maxSockets. Fewer sockets than the
// guest has are left alone: KubeVirt restarts the VM for those (its
// RestartRequired), it never unplugs.
func (l *Launcher) hotplugCPUsLocked(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	want := topologyOf(vmi)
	if want == nil || l.cpuTopology == nil || want.Sockets <= l.cpuTopology.Sockets {
		return nil
	}
	if want.Cores != l.cpuTopology.Cores || want.Threads != l.cpuTopology.Threads {
		return fmt.Errorf("spec.domain.cpu: cores and threads (%d×%d) differ from those the guest runs (%d×%d); only sockets are hot-plugged",
			want.Cores, want.Threads, l.cpuTopology.Cores, l.cpuTopology.Threads)
	}
	if maxSockets := vmi.Spec.Domain.CPU.MaxSockets; maxSockets != 0 && want.Sockets > maxSockets {
		return fmt.Errorf("spec.domain.cpu.sockets: %d is more than maxSockets (%d)", want.Sockets, maxSockets)
	}
	if err := l.h.SetVCPUs(ctx, l.domain, vcpus(want)); err != nil {
		return fmt.Errorf("hot-plugging CPU sockets %d → %d of VMI %s: %w", l.cpuTopology.Sockets, want.Sockets, l.key(), err)
	}
	l.cpuTopology = want
	return nil
}
