package launcher

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
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

// Memory hotplug (KubeVirt's LiveUpdate of spec.domain.memory.guest): once
// the VMI controller has grown the launcher pod, it sets the VMI's
// status.memory.guestRequested; the launcher asks the guest to plug the
// memory above what it booted with (virtio-mem, domainxml's maxGuest) and
// reports what the guest has (status.memory.guestCurrent).

// bootMemory is the memory status of a domain just defined: nil
// when it has no virtio-mem device, else the boot memory (the definition's
// <memory>) and the requested size on top of it.
func bootMemory(dom *libvirtxml.Domain) *v1.MemoryStatus {
	dev := hypervisor.VirtioMem(dom)
	if dev == nil || dom.Memory == nil {
		return nil
	}
	boot := int64(hypervisor.SizeBytes(dom.Memory.Value, dom.Memory.Unit))
	var req int64
	if r := dev.Target.Requested; r != nil {
		req = int64(hypervisor.SizeBytes(r.Value, r.Unit))
	}
	return &v1.MemoryStatus{
		GuestAtBoot:    resource.NewQuantity(boot, resource.BinarySI),
		GuestRequested: resource.NewQuantity(boot+req, resource.BinarySI),
		GuestCurrent:   resource.NewQuantity(boot, resource.BinarySI),
	}
}

// hotplugMemoryLocked asks the guest to plug the memory the VMI's
// status.memory.guestRequested names, when it is more than the guest was
// asked for so far. Less is left alone: memory is not hot-unplugged (the
// VM controller asks for a restart instead).
func (l *Launcher) hotplugMemoryLocked(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	st := vmi.Status.Memory
	if l.memory == nil || st == nil || st.GuestRequested == nil || st.GuestRequested.Cmp(*l.memory.GuestRequested) <= 0 {
		return nil
	}
	plug := st.GuestRequested.Value() - l.memory.GuestAtBoot.Value()
	if err := l.h.SetPluggedMemory(ctx, l.domain, uint64(plug)); err != nil {
		return fmt.Errorf("hot-plugging memory of VMI %s up to %s: %w", l.key(), st.GuestRequested, err)
	}
	req := st.GuestRequested.DeepCopy()
	l.memory.GuestRequested = &req
	return l.refreshMemoryLocked(ctx)
}

// refreshMemoryLocked reads how much of the requested memory the guest has
// plugged (the guest plugs in its own time).
func (l *Launcher) refreshMemoryLocked(ctx context.Context) error {
	if l.memory == nil || l.domain == "" {
		return nil
	}
	m, err := l.h.PluggedMemory(ctx, l.domain)
	if err != nil {
		return fmt.Errorf("reading the plugged memory of VMI %s: %w", l.key(), err)
	}
	l.memory.GuestCurrent = resource.NewQuantity(l.memory.GuestAtBoot.Value()+int64(m.Plugged), resource.BinarySI)
	return nil
}

// pluggingLocked reports whether the guest has not yet plugged all the memory it
// was asked for.
func (l *Launcher) pluggingLocked() bool {
	return l.memory != nil && l.memory.GuestCurrent.Cmp(*l.memory.GuestRequested) != 0
}

// adoptMemoryLocked reads the memory status of a domain that migrated here
// from its virtio-mem device, which carries what the guest plugged on the
// source: the boot memory is maxGuest less the device's size.
func (l *Launcher) adoptMemoryLocked(ctx context.Context) error {
	l.memory = nil
	mem := l.vmi.Spec.Domain.Memory
	if mem == nil || mem.MaxGuest == nil {
		return nil
	}
	m, err := l.h.PluggedMemory(ctx, l.domain)
	if errors.Is(err, hypervisor.ErrNoPluggableMemory) {
		return nil
	}
	if err != nil {
		return err
	}
	boot := mem.MaxGuest.Value() - int64(m.Size)
	l.memory = &v1.MemoryStatus{
		GuestAtBoot:    resource.NewQuantity(boot, resource.BinarySI),
		GuestRequested: resource.NewQuantity(boot+int64(m.Requested), resource.BinarySI),
		GuestCurrent:   resource.NewQuantity(boot+int64(m.Plugged), resource.BinarySI),
	}
	return nil
}
