package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// SetPluggedMemory implements hypervisor.Hypervisor: it changes the
// <requested> size of the live domain's virtio-mem device, as KubeVirt's
// launcher does (virDomainUpdateDeviceFlags, live only: the next boot
// starts from the definition's memory again).
func (h *Hypervisor) SetPluggedMemory(ctx context.Context, name string, bytes uint64) error {
	return h.onDomain(ctx, "plug memory of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "plug memory of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		dev, _, err := liveVirtioMem(d)
		if err != nil {
			return err
		}
		if err := hypervisor.CheckPluggable(dev, bytes); err != nil {
			return err
		}
		dev.Target.Requested = &libvirtxml.DomainMemorydevTargetRequested{Value: uint(bytes >> 10), Unit: "KiB"}
		devXML, err := dev.Marshal()
		if err != nil {
			return err
		}
		return d.UpdateDeviceFlags(devXML, golibvirt.DOMAIN_DEVICE_MODIFY_LIVE)
	})
}

// PluggedMemory implements hypervisor.Hypervisor from the live domain XML,
// where libvirt reports the device's <current> size (which libvirtxml does
// not model).
func (h *Hypervisor) PluggedMemory(ctx context.Context, name string) (hypervisor.PluggedMemory, error) {
	var out hypervisor.PluggedMemory
	err := h.onDomain(ctx, "read plugged memory of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "read plugged memory of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		dev, current, err := liveVirtioMem(d)
		if err != nil {
			return err
		}
		out.Size = hypervisor.SizeBytes(dev.Target.Size.Value, dev.Target.Size.Unit)
		if r := dev.Target.Requested; r != nil {
			out.Requested = hypervisor.SizeBytes(r.Value, r.Unit)
		}
		out.Plugged = current
		return nil
	})
	return out, err
}

// liveVirtioMem returns the live domain's virtio-mem device (with its alias,
// which the update names) and its current (plugged) size in bytes.
func liveVirtioMem(d *golibvirt.Domain) (*libvirtxml.DomainMemorydev, uint64, error) {
	desc, err := d.GetXMLDesc(0)
	if err != nil {
		return nil, 0, err
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(desc); err != nil {
		return nil, 0, fmt.Errorf("the live domain XML: %w", err)
	}
	dev := hypervisor.VirtioMem(&dom)
	if dev == nil {
		return nil, 0, hypervisor.ErrNoPluggableMemory
	}
	var current struct {
		Memory []struct {
			Model   string `xml:"model,attr"`
			Current struct {
				Value uint   `xml:",chardata"`
				Unit  string `xml:"unit,attr"`
			} `xml:"target>current"`
		} `xml:"devices>memory"`
	}
	if err := xml.Unmarshal([]byte(desc), &current); err != nil {
		return nil, 0, fmt.Errorf("the live domain XML: %w", err)
	}
	for _, m := range current.Memory {
		if m.Model == "virtio-mem" {
			return dev, hypervisor.SizeBytes(m.Current.Value, m.Current.Unit), nil
		}
	}
	return dev, 0, nil
}
