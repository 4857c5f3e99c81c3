package fake

import (
	"context"
	"fmt"
	"os"

	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// SetVCPUs implements Hypervisor: it checks count against the maximum of
// the domain's <vcpu> and records it (VCPUs reads it back); Calls records
// "SetVCPUs name".
func (f *Hypervisor) SetVCPUs(ctx context.Context, name string, count uint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "SetVCPUs", name); err != nil {
		return err
	}
	d, err := f.lookup("set vCPUs of", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateRunning && d.state.State != hypervisor.StatePaused {
		return fmt.Errorf("set vCPUs of %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil || dom.VCPU == nil {
		return fmt.Errorf("set vCPUs of %s: the domain's XML has no <vcpu> (%v)", name, err)
	}
	if count == 0 || count > dom.VCPU.Value {
		return fmt.Errorf("set vCPUs of %s: %d vCPUs: the domain has 1 to %d", name, count, dom.VCPU.Value)
	}
	d.vcpus = count
	return nil
}

// AttachDisk implements Hypervisor: the disk joins the domain's XML at
// once; its alias must be new.
func (f *Hypervisor) AttachDisk(ctx context.Context, name, diskXML string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "AttachDisk", name); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("attach a disk to", name)
	if err != nil {
		return err
	}
	var disk libvirtxml.DomainDisk
	if err := disk.Unmarshal(diskXML); err != nil {
		return fmt.Errorf("attach a disk to %s: parse disk XML: %w", name, err)
	}
	if disk.Alias == nil || disk.Target == nil {
		return fmt.Errorf("attach a disk to %s: the disk has no alias or target", name)
	}
	for _, have := range dom.Devices.Disks {
		if have.Alias != nil && have.Alias.Name == disk.Alias.Name || have.Target != nil && have.Target.Dev == disk.Target.Dev {
			return fmt.Errorf("attach a disk to %s: alias %s or target %s already in use", name, disk.Alias.Name, disk.Target.Dev)
		}
	}
	dom.Devices.Disks = append(dom.Devices.Disks, disk)
	return f.storeXML(d, dom)
}

// DetachDisk implements Hypervisor: the disk leaves the domain's XML at
// once (a Hypervisor's guest releases it without delay).
func (f *Hypervisor) DetachDisk(ctx context.Context, name, alias string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "DetachDisk", name); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("detach a disk from", name)
	if err != nil {
		return err
	}
	for i, have := range dom.Devices.Disks {
		if have.Alias != nil && have.Alias.Name == alias {
			dom.Devices.Disks = append(dom.Devices.Disks[:i], dom.Devices.Disks[i+1:]...)
			return f.storeXML(d, dom)
		}
	}
	return fmt.Errorf("detach a disk from %s: no device with alias %s: %w", name, alias, hypervisor.ErrNotFound)
}

// MemoryDump implements Hypervisor: the file gets the domain's name and
// memory size, a stand-in for the guest's memory.
func (f *Hypervisor) MemoryDump(ctx context.Context, name, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "MemoryDump", name); err != nil {
		return err
	}
	_, dom, err := f.liveDomain("dump the memory of", name)
	if err != nil {
		return err
	}
	memory := "no <memory>"
	if dom.Memory != nil {
		memory = fmt.Sprintf("%d %s", dom.Memory.Value, dom.Memory.Unit)
	}
	return os.WriteFile(path, []byte(fmt.Sprintf("fake memory dump of %s: %s\n", name, memory)), 0o644)
}

// DiskCapacity implements Hypervisor: the size ResizeDisk last set, else
// the size of the disk's source file or device, else 0.
func (f *Hypervisor) DiskCapacity(ctx context.Context, name, target string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "DiskCapacity", name); err != nil {
		return 0, err
	}
	d, dom, err := f.liveDomain("read the disk capacity of", name)
	if err != nil {
		return 0, err
	}
	if size, ok := d.capacities[target]; ok {
		return size, nil
	}
	for _, disk := range dom.Devices.Disks {
		if disk.Target == nil || disk.Target.Dev != target {
			continue
		}
		if disk.Source != nil && disk.Source.File != nil {
			if fi, err := os.Stat(disk.Source.File.File); err == nil {
				return uint64(fi.Size()), nil
			}
		}
		return 0, nil
	}
	return 0, fmt.Errorf("read the disk capacity of %s: no disk %s: %w", name, target, hypervisor.ErrNotFound)
}

// ResizeDisk implements Hypervisor: DiskCapacity reports size from now on,
// and a source file is extended to it, as QEMU does.
func (f *Hypervisor) ResizeDisk(ctx context.Context, name, target string, size uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "ResizeDisk", name); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("resize a disk of", name)
	if err != nil {
		return err
	}
	for _, disk := range dom.Devices.Disks {
		if disk.Target == nil || disk.Target.Dev != target {
			continue
		}
		if disk.Source != nil && disk.Source.File != nil {
			if err := os.Truncate(disk.Source.File.File, int64(size)); err != nil {
				return fmt.Errorf("resize a disk of %s: %w", name, err)
			}
		}
		if d.capacities == nil {
			d.capacities = map[string]uint64{}
		}
		d.capacities[target] = size
		return nil
	}
	return fmt.Errorf("resize a disk of %s: no disk %s: %w", name, target, hypervisor.ErrNotFound)
}

// Disks implements Hypervisor.
func (f *Hypervisor) Disks(ctx context.Context, name string) ([]libvirtxml.DomainDisk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Disks", name); err != nil {
		return nil, err
	}
	_, dom, err := f.liveDomain("list the disks of", name)
	if err != nil {
		return nil, err
	}
	return dom.Devices.Disks, nil
}

// liveDomain is the named running or paused domain and its parsed XML.
func (f *Hypervisor) liveDomain(op, name string) (*fakeDomain, *libvirtxml.Domain, error) {
	d, err := f.lookup(op, name)
	if err != nil {
		return nil, nil, err
	}
	if d.state.State != hypervisor.StateRunning && d.state.State != hypervisor.StatePaused {
		return nil, nil, fmt.Errorf("%s %s: domain is %s: %w", op, name, d.state.State, hypervisor.ErrInvalidState)
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil {
		return nil, nil, fmt.Errorf("%s %s: the domain's XML: %w", op, name, err)
	}
	if dom.Devices == nil {
		dom.Devices = &libvirtxml.DomainDeviceList{}
	}
	return d, &dom, nil
}

// storeXML keeps dom as d's XML.
func (f *Hypervisor) storeXML(d *fakeDomain, dom *libvirtxml.Domain) error {
	out, err := dom.Marshal()
	if err != nil {
		return err
	}
	d.xml = out
	return nil
}

// SetPluggedMemory implements Hypervisor: it checks bytes against the
// domain's virtio-mem device and plugs them at once; Calls records
// "SetPluggedMemory name".
func (f *Hypervisor) SetPluggedMemory(ctx context.Context, name string, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "SetPluggedMemory", name); err != nil {
		return err
	}
	d, dev, err := f.virtioMem("plug memory of", name)
	if err != nil {
		return err
	}
	if err := hypervisor.CheckPluggable(dev, bytes); err != nil {
		return fmt.Errorf("plug memory of %s: %w", name, err)
	}
	d.plugged = &bytes
	return nil
}

// PluggedMemory implements Hypervisor; Calls records "PluggedMemory name".
func (f *Hypervisor) PluggedMemory(ctx context.Context, name string) (hypervisor.PluggedMemory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "PluggedMemory", name); err != nil {
		return hypervisor.PluggedMemory{}, err
	}
	d, dev, err := f.virtioMem("read plugged memory of", name)
	if err != nil {
		return hypervisor.PluggedMemory{}, err
	}
	m := hypervisor.PluggedMemory{Size: hypervisor.SizeBytes(dev.Target.Size.Value, dev.Target.Size.Unit)}
	if r := dev.Target.Requested; r != nil {
		m.Requested = hypervisor.SizeBytes(r.Value, r.Unit)
	}
	if d.plugged != nil {
		m.Requested = *d.plugged
	}
	m.Plugged = m.Requested
	return m, nil
}

// virtioMem returns an active domain and its virtio-mem device.
func (f *Hypervisor) virtioMem(op, name string) (*fakeDomain, *libvirtxml.DomainMemorydev, error) {
	d, dom, err := f.liveDomain(op, name)
	if err != nil {
		return nil, nil, err
	}
	dev := hypervisor.VirtioMem(dom)
	if dev == nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, name, hypervisor.ErrNoPluggableMemory)
	}
	return d, dev, nil
}

// VCPUs returns the vCPU count SetVCPUs last set on the domain, else the
// current count of its definition.
func (f *Hypervisor) VCPUs(name string) (uint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookup("vCPUs of", name)
	if err != nil {
		return 0, err
	}
	if d.vcpus != 0 {
		return d.vcpus, nil
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil || dom.VCPU == nil {
		return 0, fmt.Errorf("vCPUs of %s: the domain's XML has no <vcpu> (%v)", name, err)
	}
	if dom.VCPU.Current != 0 {
		return dom.VCPU.Current, nil
	}
	return dom.VCPU.Value, nil
}
