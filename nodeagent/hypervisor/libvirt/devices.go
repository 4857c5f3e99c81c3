package libvirt

import (
	"context"
	"fmt"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// SetVCPUs implements hypervisor.Hypervisor.
func (h *Hypervisor) SetVCPUs(ctx context.Context, name string, count uint) error {
	return h.onDomain(ctx, "set vCPUs of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "set vCPUs of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		max, err := d.GetVcpusFlags(golibvirt.DOMAIN_VCPU_LIVE | golibvirt.DOMAIN_VCPU_MAXIMUM)
		if err != nil {
			return err
		}
		if count == 0 || count > uint(max) {
			return fmt.Errorf("%d vCPUs: the domain has 1 to %d", count, max)
		}
		return d.SetVcpusFlags(count, golibvirt.DOMAIN_VCPU_LIVE)
	})
}

// AttachDisk implements hypervisor.Hypervisor.
func (h *Hypervisor) AttachDisk(ctx context.Context, name, diskXML string) error {
	return h.onDomain(ctx, "attach a disk to", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "attach a disk to", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.AttachDeviceFlags(diskXML, golibvirt.DOMAIN_DEVICE_MODIFY_LIVE|golibvirt.DOMAIN_DEVICE_MODIFY_CONFIG)
	})
}

// DetachDisk implements hypervisor.Hypervisor.
func (h *Hypervisor) DetachDisk(ctx context.Context, name, alias string) error {
	return h.onDomain(ctx, "detach a disk from", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "detach a disk from", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.DetachDeviceAlias(alias, golibvirt.DOMAIN_DEVICE_MODIFY_LIVE|golibvirt.DOMAIN_DEVICE_MODIFY_CONFIG)
	})
}

// MemoryDump implements hypervisor.Hypervisor.
func (h *Hypervisor) MemoryDump(ctx context.Context, name, path string) error {
	return h.onDomain(ctx, "dump the memory of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "dump the memory of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.CoreDumpWithFormat(path, golibvirt.DOMAIN_CORE_DUMP_FORMAT_RAW, golibvirt.DUMP_MEMORY_ONLY)
	})
}

// DiskCapacity implements hypervisor.Hypervisor (virDomainGetBlockInfo).
func (h *Hypervisor) DiskCapacity(ctx context.Context, name, target string) (uint64, error) {
	var out uint64
	err := h.onDomain(ctx, "read the disk capacity of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "read the disk capacity of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		info, err := d.GetBlockInfo(target, 0)
		if err != nil {
			return err
		}
		out = info.Capacity
		return nil
	})
	return out, err
}

// ResizeDisk implements hypervisor.Hypervisor (virDomainBlockResize, in
// bytes).
func (h *Hypervisor) ResizeDisk(ctx context.Context, name, target string, size uint64) error {
	return h.onDomain(ctx, "resize a disk of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "resize a disk of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.BlockResize(target, size, golibvirt.DOMAIN_BLOCK_RESIZE_BYTES)
	})
}

// Disks implements hypervisor.Hypervisor.
func (h *Hypervisor) Disks(ctx context.Context, name string) ([]libvirtxml.DomainDisk, error) {
	var out []libvirtxml.DomainDisk
	err := h.onDomain(ctx, "list the disks of", name, func(d *golibvirt.Domain) error {
		desc, err := d.GetXMLDesc(0)
		if err != nil {
			return err
		}
		var dom libvirtxml.Domain
		if err := dom.Unmarshal(desc); err != nil {
			return err
		}
		if dom.Devices != nil {
			out = dom.Devices.Disks
		}
		return nil
	})
	return out, err
}
