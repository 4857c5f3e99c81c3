package domainxml

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Memory hotplug (KubeVirt's LiveUpdate of spec.domain.memory.guest, up to
// maxGuest): the guest boots with the memory it had at its first start
// (status.memory.guestAtBoot) in one NUMA cell, and a virtio-mem device
// holds the rest up to maxGuest; its requested size, the guest memory above
// the boot memory, is what the launcher changes live. The rules are
// KubeVirt's (pkg/liveupdate/memory); the block size and the least guest
// memory are vmapi's, which also defaults maxGuest (v1.SetHotplugDefaults).

// MaxGuestField is the field that bounds memory hotplug.
const MaxGuestField = "spec.domain.memory.maxGuest"

// hotplugMem is what memory hotplug needs of a guest, in bytes: the memory
// it booted with, the most it may grow to and the virtio-mem block size.
type hotplugMem struct {
	Boot, Max, Block int64
}

// convertMemoryHotplug adds the virtio-mem device and the guest NUMA cell
// it plugs into when the VMI has a maxGuest above its boot memory. guest
// is the guest memory now (field names it).
func (c *converter) convertMemoryHotplug(guest *resource.Quantity, field string) error {
	hp, err := c.hotplugMemory(guest, field)
	if err != nil || hp == nil {
		return err
	}
	kib := func(b int64) uint { return uint(b / 1024) }
	c.dom.Memory = &libvirtxml.DomainMemory{Value: kib(hp.Boot), Unit: "KiB"}
	// libvirt 9.0 wants a slot count with maxMemory; virtio-mem takes none.
	c.dom.MaximumMemory = &libvirtxml.DomainMaxMemory{Value: kib(hp.Max), Unit: "KiB", Slots: 1}
	maxVCPUs := c.vcpus
	if c.dom.VCPU != nil {
		maxVCPUs = c.dom.VCPU.Value
	}
	cell := uint(0)
	if c.dom.CPU == nil {
		c.dom.CPU = &libvirtxml.DomainCPU{}
	}
	c.dom.CPU.Numa = &libvirtxml.DomainNuma{Cell: []libvirtxml.DomainCell{{
		ID: &cell, CPUs: fmt.Sprintf("0-%d", maxVCPUs-1), Memory: kib(hp.Boot), Unit: "KiB",
	}}}
	if maxVCPUs == 1 {
		c.dom.CPU.Numa.Cell[0].CPUs = "0"
	}
	c.dom.Devices.Memorydevs = append(c.dom.Devices.Memorydevs, libvirtxml.DomainMemorydev{
		Model: "virtio-mem",
		Target: &libvirtxml.DomainMemorydevTarget{
			Size:      &libvirtxml.DomainMemorydevTargetSize{Value: kib(hp.Max - hp.Boot), Unit: "KiB"},
			Node:      &libvirtxml.DomainMemorydevTargetNode{Value: 0},
			Block:     &libvirtxml.DomainMemorydevTargetBlock{Value: kib(hp.Block), Unit: "KiB"},
			Requested: &libvirtxml.DomainMemorydevTargetRequested{Value: kib(guest.Value() - hp.Boot), Unit: "KiB"},
		},
	})
	return nil
}

// hotplugMemory checks a VMI's maxGuest against KubeVirt's rules and
// returns what hotplug needs, or nil when the guest cannot grow (no
// maxGuest, or maxGuest equal to the memory it booted with).
func (c *converter) hotplugMemory(guest *resource.Quantity, field string) (*hotplugMem, error) {
	mem := c.spec.Memory
	if mem == nil || mem.MaxGuest == nil {
		return nil, nil
	}
	boot := guest.Value()
	if st := c.vmi.Status.Memory; st != nil && st.GuestAtBoot != nil {
		boot = st.GuestAtBoot.Value()
	}
	maxGuest := mem.MaxGuest.Value()
	if maxGuest == boot && guest.Value() == boot {
		return nil, nil
	}
	if mem.Guest == nil {
		return nil, fieldErrorf("spec.domain.memory.guest", "required when %s is set (memory hotplug grows the guest memory)", MaxGuestField)
	}
	block := v1.MemoryHotplugBlock(mem)
	alignment := resource.NewQuantity(block, resource.BinarySI)
	switch {
	case guest.Value() > maxGuest:
		return nil, fieldErrorf(field, "%s is more than %s (%s)", guest, MaxGuestField, mem.MaxGuest)
	case guest.Value() < boot:
		return nil, fieldErrorf(field, "%s is less than the %s the guest booted with: memory is not hot-unplugged", guest, resource.NewQuantity(boot, resource.BinarySI))
	case guest.Value()%block != 0:
		return nil, fieldErrorf(field, "%s is not %s aligned, as memory hotplug needs", guest, alignment)
	case maxGuest%block != 0:
		return nil, fieldErrorf(MaxGuestField, "%s is not %s aligned, as memory hotplug needs", mem.MaxGuest, alignment)
	case boot < v1.MinHotplugGuestMemory:
		return nil, fieldErrorf(MaxGuestField, "memory hotplug needs at least 1Gi of guest memory (%s has %s)", field, resource.NewQuantity(boot, resource.BinarySI))
	case c.opts.arch.libvirt != "x86_64":
		return nil, unsupportedf(MaxGuestField, "hot-plug memory into an %s guest (x86_64 only)", c.opts.arch.name)
	}
	if cpu := c.spec.CPU; cpu != nil {
		if cpu.Realtime != nil {
			return nil, fieldErrorf(MaxGuestField, "memory hotplug is not compatible with spec.domain.cpu.realtime")
		}
		if cpu.NUMA != nil && cpu.NUMA.GuestMappingPassthrough != nil {
			return nil, fieldErrorf(MaxGuestField, "memory hotplug is not compatible with spec.domain.cpu.numa.guestMappingPassthrough")
		}
	}
	if c.spec.LaunchSecurity != nil {
		return nil, fieldErrorf(MaxGuestField, "memory hotplug is not compatible with spec.domain.launchSecurity")
	}
	return &hotplugMem{Boot: boot, Max: maxGuest, Block: block}, nil
}
