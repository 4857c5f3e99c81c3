package domainxml

import (
	"net"
	"strconv"

	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// convertInterfaces attaches spec.domain.devices.interfaces as ethernet
// devices on the tap devices the launcher created: the bridge binding (pod
// or Multus network) and the masquerade binding (pod network only) look the
// same to libvirt; they differ in how the launcher wires the tap. An
// interface with no binding gets the bridge binding, as in KubeVirt.
func (c *converter) convertInterfaces() error {
	ifaces := c.spec.Devices.Interfaces
	if len(ifaces) == 0 {
		return nil
	}
	out := make([]libvirtxml.DomainInterface, 0, len(ifaces))
	for i := range ifaces {
		iface := &ifaces[i]
		if !isDeviceName(iface.Name) {
			return fieldErrorf(ifaceField(i, "name"), "%q must be 1 to 63 letters, digits and _.- (not . or ..)", iface.Name)
		}
		ordinal, pod, err := c.networkOrdinal(iface.Name, i)
		if err != nil {
			return err
		}
		if err := checkBinding(&iface.InterfaceBindingMethod, pod, i); err != nil {
			return err
		}
		if iface.PasstBinding != nil {
			if err := c.convertPasst(iface, i); err != nil {
				return err
			}
			continue
		}
		out = append(out, libvirtxml.DomainInterface{})
		nic := &out[len(out)-1]

		tap, ok := c.opts.TapDevices[iface.Name]
		if !ok {
			tap = defaultTap(ordinal)
		} else if !isToken(tap, 15, "_.-") {
			return fieldErrorf("Options.TapDevices["+strconv.Quote(iface.Name)+"]", "%q is not a network device name", tap)
		}
		nic.Target = &libvirtxml.DomainInterfaceTarget{Dev: tap, Managed: "no"}
		nic.Source = &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}}

		model, virtio, err := c.nicModel(iface.Model, i)
		if err != nil {
			return err
		}
		nic.Model = &libvirtxml.DomainInterfaceModel{Type: model}
		if virtio && enabled(c.spec.Devices.NetworkInterfaceMultiQueue, false) && c.vcpus > 1 {
			nic.Driver = &libvirtxml.DomainInterfaceDriver{Queues: c.vcpus}
		}

		if iface.MacAddress != "" {
			mac, err := net.ParseMAC(iface.MacAddress)
			if err != nil || len(mac) != 6 {
				return fieldErrorf(ifaceField(i, "macAddress"), "%q is not a 48-bit MAC address", iface.MacAddress)
			}
			if mac[0]&1 != 0 {
				return fieldErrorf(ifaceField(i, "macAddress"), "%q is a multicast address", iface.MacAddress)
			}
			nic.MAC = &libvirtxml.DomainInterfaceMAC{Address: mac.String()}
		}
		if iface.BootOrder != nil {
			if err := c.claimBootOrder(*iface.BootOrder, ifaceField(i, "bootOrder")); err != nil {
				return err
			}
			nic.Boot = &libvirtxml.DomainDeviceBoot{Order: *iface.BootOrder}
		} else {
			// No network boot: skip loading the NIC's iPXE option ROM.
			nic.ROM = &libvirtxml.DomainROM{Enabled: "no"}
		}
		nic.Alias = &libvirtxml.DomainAlias{Name: userAlias(iface.Name)}
		if iface.ACPIIndex != 0 {
			if err := checkACPIIndex(ifaces, i); err != nil {
				return err
			}
			nic.ACPI = &libvirtxml.DomainDeviceACPI{Index: uint(iface.ACPIIndex)}
		}
		if iface.State == v1.InterfaceStateLinkDown {
			// KubeVirt's link state: the NIC is there, its cable unplugged.
			nic.Link = &libvirtxml.DomainInterfaceLink{State: "down"}
		}
		if iface.PciAddress != "" {
			addr, err := parsePCIAddress(iface.PciAddress)
			if err != nil {
				return fieldErrorf(ifaceField(i, "pciAddress"), "%v", err)
			}
			nic.Address = addr
		}
	}
	if len(out) > 0 {
		c.dom.Devices.Interfaces = out
	}
	return nil
}

// networkOrdinal finds the network of interface i: ordinal 0 for the pod
// network, N for the N-th Multus network in spec.networks.
func (c *converter) networkOrdinal(name string, i int) (ordinal int, pod bool, err error) {
	multus, pods := 0, 0
	nets := c.vmi.Spec.Networks
	for j := range nets {
		n := &nets[j]
		switch {
		case n.Pod != nil && n.Multus != nil:
			if n.Name == name {
				return 0, false, fieldErrorf("spec.networks["+strconv.Itoa(j)+"]", "may set only one of pod and multus")
			}
		case n.Pod != nil:
			pods++
			if pods > 1 {
				return 0, false, fieldErrorf("spec.networks["+strconv.Itoa(j)+"].pod", "only one network may be the pod network")
			}
			if n.Name == name {
				return 0, true, nil
			}
		case n.Multus != nil:
			multus++
			if n.Name == name {
				return multus, false, nil
			}
		default:
			if n.Name == name {
				return 0, false, fieldErrorf("spec.networks["+strconv.Itoa(j)+"]", "must set pod or multus")
			}
		}
	}
	return 0, false, fieldErrorf(ifaceField(i, "name"), "no network named %q in spec.networks", name)
}

// checkBinding accepts the bridge binding and, on the pod network, the
// masquerade and passt bindings.
func checkBinding(b *v1.InterfaceBindingMethod, pod bool, i int) error {
	n := 0
	for _, set := range [...]bool{b.Bridge != nil, b.Masquerade != nil, b.Slirp != nil, b.SRIOV != nil, b.Macvtap != nil, b.Passt != nil, b.PasstBinding != nil, b.Binding != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return fieldErrorf(ifaceField(i, ""), "may set only one binding")
	case b.Masquerade != nil && !pod:
		return fieldErrorf(ifaceField(i, "masquerade"), "only supported on the pod network")
	case b.PasstBinding != nil && !pod:
		return fieldErrorf(ifaceField(i, "passtBinding"), "only supported on the pod network")
	case b.Slirp != nil:
		return fieldErrorf(ifaceField(i, "slirp"), "binding not supported (use bridge, masquerade or passtBinding)")
	case b.SRIOV != nil:
		return fieldErrorf(ifaceField(i, "sriov"), "binding not supported (use bridge, masquerade or passtBinding)")
	case b.Macvtap != nil:
		return fieldErrorf(ifaceField(i, "macvtap"), "binding not supported (use bridge, masquerade or passtBinding)")
	case b.Passt != nil:
		return fieldErrorf(ifaceField(i, "passt"), "the passt binding plugin is discontinued in KubeVirt; use passtBinding, bridge or masquerade")
	case b.Binding != nil:
		return fieldErrorf(ifaceField(i, "binding"), "network binding plugins are not supported (use bridge, masquerade or passtBinding)")
	}
	return nil
}

// checkACPIIndex checks interface i's acpiIndex, by which the guest names
// the NIC (eno<N> with systemd's predictable names): QEMU's range, and each
// index once.
func checkACPIIndex(ifaces []v1.Interface, i int) error {
	n := ifaces[i].ACPIIndex
	if n < 0 || n > 16383 {
		return fieldErrorf(ifaceField(i, "acpiIndex"), "%d is not between 1 and 16383 (QEMU's acpi-index)", n)
	}
	for j := range i {
		if ifaces[j].ACPIIndex == n {
			return fieldErrorf(ifaceField(i, "acpiIndex"), "%d is also interface %q's", n, ifaces[j].Name)
		}
	}
	return nil
}

// nicModel maps spec's NIC model to libvirt's; virtio reports whether it
// is a virtio device.
func (c *converter) nicModel(model string, i int) (m string, virtio bool, err error) {
	switch model {
	case "", "virtio":
		return c.virtioModel, true, nil
	case "e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139":
		return model, false, nil
	}
	return "", false, fieldErrorf(ifaceField(i, "model"), "unknown model %q (want virtio, e1000, e1000e, igb, ne2k_pci, pcnet or rtl8139)", model)
}

// parsePCIAddress parses a PCI address in DDDD:BB:SS.F form.
func parsePCIAddress(s string) (*libvirtxml.DomainAddress, error) {
	bad := func() (*libvirtxml.DomainAddress, error) {
		return nil, &parseError{s}
	}
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return bad()
	}
	domain, err1 := strconv.ParseUint(s[0:4], 16, 16)
	bus, err2 := strconv.ParseUint(s[5:7], 16, 8)
	slot, err3 := strconv.ParseUint(s[8:10], 16, 8)
	fn, err4 := strconv.ParseUint(s[11:12], 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || slot > 0x1f || fn > 7 {
		return bad()
	}
	d, b, sl, f := uint(domain), uint(bus), uint(slot), uint(fn)
	return &libvirtxml.DomainAddress{PCI: &libvirtxml.DomainAddressPCI{Domain: &d, Bus: &b, Slot: &sl, Function: &f}}, nil
}

type parseError struct{ s string }

func (e *parseError) Error() string {
	return strconv.Quote(e.s) + " is not a PCI address (want DDDD:BB:SS.F, e.g. 0000:81:01.0)"
}

func ifaceField(i int, sub string) string {
	f := "spec.domain.devices.interfaces[" + strconv.Itoa(i) + "]"
	if sub != "" {
		f += "." + sub
	}
	return f
}
