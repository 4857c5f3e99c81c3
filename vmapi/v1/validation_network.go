package v1

import (
	"fmt"
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxInterfaceNameLength bounds interface and network names (the CRD's
// maxLength, which keeps its CEL rules within the API server's cost budget;
// KubeVirt sets none).
const maxInterfaceNameLength = 63

// validateInterfaceName checks an interface or network name as KubeVirt's
// webhook checks an interface's (letters, digits, '-' and '_'; a network
// has its interface's name), at most 63 characters, not used before in the
// same list.
func validateInterfaceName(p *field.Path, name string, seen map[string]bool) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a name is required")}
	}
	var errs field.ErrorList
	if strings.IndexFunc(name, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		errs = append(errs, field.Invalid(p, name, "may contain only letters, digits, '-' and '_'"))
	}
	if len(name) > maxInterfaceNameLength {
		errs = append(errs, field.TooLong(p, name, maxInterfaceNameLength))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(p, name))
	}
	seen[name] = true
	return errs
}

// validateInterfaces checks interface names, that each names a network, and
// each interface's binding, MAC address, PCI address and ports.
func validateInterfaces(ifacesPath *field.Path, ifaces []Interface, networks []Network, networksPath *field.Path) field.ErrorList {
	byName := make(map[string]*Network, len(networks))
	for i := range networks {
		if _, dup := byName[networks[i].Name]; !dup {
			byName[networks[i].Name] = &networks[i]
		}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range ifaces {
		iface := &ifaces[i]
		p := ifacesPath.Index(i)
		errs = append(errs, validateInterfaceName(p.Child("name"), iface.Name, seen)...)
		network, found := byName[iface.Name]
		if iface.Name != "" && !found {
			errs = append(errs, withDetail(field.NotFound(p.Child("name"), iface.Name), fmt.Sprintf("no network of this name in %s", networksPath)))
		}
		errs = append(errs, validateOneOf(p, "binding", bindings(&iface.InterfaceBindingMethod), false)...)
		if iface.Masquerade != nil && found && network.Pod == nil && network.Multus != nil {
			errs = append(errs, field.Forbidden(p.Child("masquerade"), fmt.Sprintf("masquerade works only on the pod network, and network %q is a multus network", network.Name)))
		}
		if iface.PasstBinding != nil && found && network.Pod == nil && network.Multus != nil {
			errs = append(errs, field.Forbidden(p.Child("passtBinding"), fmt.Sprintf("passtBinding works only on the pod network, and network %q is a multus network", network.Name)))
		}
		errs = append(errs, validateMACAddress(p.Child("macAddress"), iface.MacAddress)...)
		errs = append(errs, validatePCIAddress(p.Child("pciAddress"), iface.PciAddress)...)
		errs = append(errs, validatePorts(p.Child("ports"), iface.Ports)...)
		if iface.DHCPOptions != nil {
			errs = append(errs, validateDHCPOptions(p.Child("dhcpOptions"), iface.DHCPOptions)...)
		}
	}
	return errs
}

// ValidateDHCPOptions checks an interface's dhcpOptions as KubeVirt's
// webhook does (NTP servers are IPv4 addresses, private options are 224 to
// 254 and each given once), and that each fits a DHCP option (255 bytes).
// Its errors' fields are relative to dhcpOptions.
func ValidateDHCPOptions(o *DHCPOptions) field.ErrorList {
	return validateDHCPOptions(nil, o)
}

func validateDHCPOptions(p *field.Path, o *DHCPOptions) field.ErrorList {
	var errs field.ErrorList
	const maxOption = 255
	if len(o.BootFileName) > maxOption {
		errs = append(errs, field.TooLong(p.Child("bootFileName"), o.BootFileName, maxOption))
	}
	if len(o.TFTPServerName) > maxOption {
		errs = append(errs, field.TooLong(p.Child("tftpServerName"), o.TFTPServerName, maxOption))
	}
	for i, s := range o.NTPServers {
		if ip := net.ParseIP(s); ip == nil || ip.To4() == nil {
			errs = append(errs, field.Invalid(p.Child("ntpServers").Index(i), s, "NTP servers must be IPv4 addresses"))
		}
	}
	if 4*len(o.NTPServers) > maxOption {
		errs = append(errs, field.TooMany(p.Child("ntpServers"), len(o.NTPServers), maxOption/4))
	}
	seen := map[int32]bool{}
	for i, po := range o.PrivateOptions {
		pp := p.Child("privateOptions").Index(i)
		switch {
		case po.Option < 224 || po.Option > 254:
			errs = append(errs, field.Invalid(pp.Child("option"), po.Option, "private DHCP options are 224 to 254"))
		case seen[po.Option]:
			errs = append(errs, field.Duplicate(pp.Child("option"), po.Option))
		}
		seen[po.Option] = true
		if len(po.Value) > maxOption {
			errs = append(errs, field.TooLong(pp.Child("value"), po.Value, maxOption))
		}
	}
	return errs
}

// bindings lists an interface's bindings in the order of the API.
func bindings(b *InterfaceBindingMethod) []setField {
	return []setField{
		{"bridge", b.Bridge != nil},
		{"slirp", b.Slirp != nil},
		{"masquerade", b.Masquerade != nil},
		{"sriov", b.SRIOV != nil},
		{"macvtap", b.Macvtap != nil},
		{"passt", b.Passt != nil},
		{"passtBinding", b.PasstBinding != nil},
		{"binding", b.Binding != nil},
	}
}

// validateMACAddress checks an optional MAC address is a 6-byte (EUI-48) address.
func validateMACAddress(p *field.Path, mac string) field.ErrorList {
	if mac == "" {
		return nil
	}
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return field.ErrorList{field.Invalid(p, mac, "must be a 6-byte MAC address such as 02:00:00:00:00:01")}
	}
	return nil
}

// validatePorts checks port numbers and protocols. A port listed twice is
// admitted, as KubeVirt admits it (the launcher pod lists it twice, which
// the API server only warns of).
func validatePorts(portsPath *field.Path, ports []Port) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := portsPath.Index(i)
		switch port.Protocol {
		case "", "TCP", "UDP":
		default:
			errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, []string{"TCP", "UDP"}))
		}
		if port.Port < 1 || port.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port, "must be between 1 and 65535"))
		}
	}
	return errs
}

// validateNetworks checks network names, that each network has exactly one
// source, and that the guest has at most one pod network and one multus
// default network, not both.
func validateNetworks(networksPath *field.Path, networks []Network) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	var podPath, multusDefaultPath *field.Path
	for i := range networks {
		n := &networks[i]
		p := networksPath.Index(i)
		errs = append(errs, validateInterfaceName(p.Child("name"), n.Name, seen)...)
		errs = append(errs, validateOneOf(p, "network source", []setField{
			{"pod", n.Pod != nil}, {"multus", n.Multus != nil},
		}, true)...)
		if n.Pod != nil {
			if podPath != nil {
				errs = append(errs, field.Forbidden(p.Child("pod"), fmt.Sprintf("a guest has at most one pod network, and %s already is one", podPath)))
			} else {
				podPath = p
			}
		}
		if n.Multus == nil {
			continue
		}
		if n.Multus.NetworkName == "" {
			errs = append(errs, field.Required(p.Child("multus", "networkName"), "name the NetworkAttachmentDefinition, as <name> or <namespace>/<name>"))
		}
		if n.Multus.Default {
			if multusDefaultPath != nil {
				errs = append(errs, field.Forbidden(p.Child("multus", "default"), fmt.Sprintf("a guest has at most one multus default network, and %s already is one", multusDefaultPath)))
			} else {
				multusDefaultPath = p
			}
		}
	}
	if podPath != nil && multusDefaultPath != nil {
		errs = append(errs, field.Forbidden(multusDefaultPath.Child("multus", "default"),
			fmt.Sprintf("a multus default network replaces the pod network, so it cannot be combined with the pod network %s", podPath)))
	}
	return errs
}
