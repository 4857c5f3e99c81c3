package domainxml

import (
	"crypto/sha256"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The QEMU ids of the passt NIC: the pod network is the only network passt
// serves, so a VMI has at most one.
const (
	passtNetdevID = "passt0"
	// PasstNICID is the QEMU device id of the NIC of the interface with
	// the passtBinding: libvirt does not list it, and QEMU's monitor
	// commands (set_link) name it by this id.
	PasstNICID = "passt0-nic"
)

// passtNICModels are QEMU's device names of spec's NIC models; virtio is
// c.virtioModel's.
var passtNICModels = map[string]string{
	"e1000": "e1000", "e1000e": "e1000e", "igb": "igb", "ne2k_pci": "ne2k_pci", "pcnet": "pcnet", "rtl8139": "rtl8139",
}

// convertPasst renders the interface with KubeVirt's passtBinding: a NIC
// whose frames QEMU exchanges with passt over Options.PasstSocket (QEMU's
// stream netdev, QEMU 7.2 and later); passt, which the launcher runs in the
// pod, gives the guest the pod's address, routes and name servers by DHCP
// and forwards the pod's ports to it.
//
// It is QEMU arguments (<qemu:commandline>), not an <interface>: libvirt 9.0,
// Debian 12's, knows <backend type="passt"/> but refuses it when parsing
// (every value of the attribute is "Invalid value"), and an <interface
// type="user"> without it is slirp. So libvirt does not list the NIC; its
// MAC is the spec's or one derived from the VMI's UID (stable across
// restarts), and status.interfaces comes from the pod's address and the
// guest agent.
func (c *converter) convertPasst(iface *v1.Interface, i int) error {
	if iface.State == v1.InterfaceStateLinkDown {
		return fieldErrorf(ifaceField(i, "state"), "link state down is not supported with passtBinding")
	}
	if iface.PciAddress != "" {
		return fieldErrorf(ifaceField(i, "pciAddress"), "not supported with passtBinding")
	}
	sock := c.opts.PasstSocket
	if !filepath.IsAbs(sock) || strings.ContainsAny(sock, ",\x00") {
		return fieldErrorf("Options.PasstSocket", "%q is not an absolute path without commas", sock)
	}
	model := passtNICModels[iface.Model]
	switch {
	case iface.Model == "" || iface.Model == "virtio":
		// virtio-net-pci-transitional or -non-transitional.
		model = "virtio-net-pci-" + strings.TrimPrefix(c.virtioModel, "virtio-")
	case model == "":
		_, _, err := c.nicModel(iface.Model, i)
		return err
	}
	mac := iface.MacAddress
	if mac == "" {
		mac = passtMAC(c.vmi.UID, iface.Name)
	} else if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 || hw[0]&1 != 0 {
		return fieldErrorf(ifaceField(i, "macAddress"), "%q is not a 48-bit unicast MAC address", mac)
	} else {
		mac = hw.String()
	}
	dev := model + ",netdev=" + passtNetdevID + ",id=" + PasstNICID + ",mac=" + mac + "," + c.passtSlot()
	if iface.BootOrder != nil {
		if err := c.claimBootOrder(*iface.BootOrder, ifaceField(i, "bootOrder")); err != nil {
			return err
		}
		dev += ",bootindex=" + strconv.FormatUint(uint64(*iface.BootOrder), 10)
	} else {
		dev += ",romfile="
	}
	if iface.ACPIIndex != 0 {
		if err := checkACPIIndex(c.spec.Devices.Interfaces, i); err != nil {
			return err
		}
		dev += ",acpi-index=" + strconv.Itoa(iface.ACPIIndex)
	}
	if c.dom.QEMUCommandline == nil {
		c.dom.QEMUCommandline = &libvirtxml.DomainQEMUCommandline{}
	}
	c.dom.QEMUCommandline.Args = append(c.dom.QEMUCommandline.Args,
		libvirtxml.DomainQEMUCommandlineArg{Value: "-netdev"},
		libvirtxml.DomainQEMUCommandlineArg{Value: "stream,id=" + passtNetdevID + ",server=off,addr.type=unix,addr.path=" + sock},
		libvirtxml.DomainQEMUCommandlineArg{Value: "-device"},
		libvirtxml.DomainQEMUCommandlineArg{Value: dev},
	)
	return nil
}

// passtSlot is the PCI slot of the passt NIC. libvirt does not see it, and
// QEMU would give it the first free slot before libvirt's own devices take
// theirs, so it gets one libvirt leaves free: 0x1e of i440fx's pci.0 (libvirt
// fills slots from the bottom), 0x1c of the Q35 and arm64 root complex
// pcie.0 (libvirt's ICH9 devices sit at 0x1b, 0x1d, 0x1e and 0x1f, its
// root ports from 0x02).
func (c *converter) passtSlot() string {
	if c.opts.arch.name == "amd64" && !isQ35(c.dom.OS.Type.Machine) {
		return "bus=pci.0,addr=0x1e"
	}
	return "bus=pcie.0,addr=0x1c"
}

// passtMAC is the MAC of a passtBinding interface whose spec gives none:
// QEMU's locally administered prefix 52:54:00 and three bytes of a hash of
// the VMI's UID and the interface's name, so a restarted guest keeps it.
func passtMAC(uid types.UID, name string) string {
	sum := sha256.Sum256([]byte(string(uid) + "/" + name))
	return net.HardwareAddr{0x52, 0x54, 0x00, sum[0], sum[1], sum[2]}.String()
}
