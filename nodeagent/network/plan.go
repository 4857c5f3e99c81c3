package network

import (
	"fmt"
	"net"
	"strconv"

	"github.com/vmkit/vmkit/internal/netnames"
	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Bindings the agent wires on the pod network.
const (
	BindingMasquerade = "masquerade"
	BindingBridge     = "bridge"
	// BindingPasst is KubeVirt's passtBinding: the agent wires nothing;
	// the launcher runs passt (see PasstArgs), which gives the guest the
	// pod's address and forwards the pod's ports to it.
	BindingPasst = "passt"
)

// Interface is one VMI interface as the agent wires it: on the pod network
// (or the Multus network that replaces it), or on a Multus secondary
// network. Device names are KubeVirt's (internal/netnames).
type Interface struct {
	Name         string           // spec.domain.devices.interfaces[i].name
	Index        int              // i
	Binding      string           // BindingMasquerade, BindingBridge or BindingPasst
	PodInterface string           // "eth0" (the pod network's device in the pod), "pod<hash>" for a secondary network
	Tap          string           // "tap0", "tap<N>" for the N-th Multus network (what domainxml attaches the NIC to: <interface type="ethernet"><target dev="tap0" managed="no"/>)
	Bridge       string           // "k6t-eth0", "k6t-<hash>" for a secondary network
	MAC          net.HardwareAddr // spec macAddress; nil when not given
	Ports        []v1.Port        // masquerade and passt: forward only these (empty: everything); Protocol is always "TCP" or "UDP"
	// Secondary says the interface is on a Multus secondary network: the
	// bridge binding, whose pod interface may have no IPv4 address (a
	// layer-2 network), and then the guest gets none by DHCP.
	Secondary bool
	// MultiQueue makes the tap multi-queue (IFF_MULTI_QUEUE), for a virtio
	// NIC when spec.domain.devices.networkInterfaceMultiqueue is true:
	// libvirt then opens it once per vCPU (domainxml's <driver queues>).
	MultiQueue bool
	// DHCP are the interface's dhcpOptions for the guest's DHCP lease:
	// boot file, TFTP server, NTP servers and private options.
	DHCP DHCPOptions
}

// DHCPOptions are what spec.domain.devices.interfaces[i].dhcpOptions adds
// to the guest's DHCP lease, checked and parsed.
type DHCPOptions struct {
	BootFileName, TFTPServerName string
	NTPServers                   []net.IP
	PrivateOptions               []dhcp.PrivateOption
}

// apply adds the options to a lease.
func (o DHCPOptions) apply(l *dhcp.Lease) {
	l.BootFileName, l.TFTPServerName = o.BootFileName, o.TFTPServerName
	l.NTPServers, l.PrivateOptions = o.NTPServers, o.PrivateOptions
}

// planDHCPOptions parses an interface's dhcpOptions, refusing what
// KubeVirt's webhook refuses (and what no DHCP option holds) by field.
func planDHCPOptions(o *v1.DHCPOptions, i int) (DHCPOptions, error) {
	if o == nil {
		return DHCPOptions{}, nil
	}
	if errs := v1.ValidateDHCPOptions(o); len(errs) > 0 {
		return DHCPOptions{}, fieldErrorf(ifaceField(i, "dhcpOptions."+errs[0].Field), "%s", errs[0].ErrorBody())
	}
	p := DHCPOptions{BootFileName: o.BootFileName, TFTPServerName: o.TFTPServerName}
	for _, s := range o.NTPServers {
		p.NTPServers = append(p.NTPServers, net.ParseIP(s).To4())
	}
	for _, po := range o.PrivateOptions {
		p.PrivateOptions = append(p.PrivateOptions, dhcp.PrivateOption{Code: uint8(po.Option), Value: []byte(po.Value)})
	}
	return p, nil
}

// FieldError is a VMI spec that Plan refuses: retrying will not help.
type FieldError struct {
	// Field is the path of the offending field, for example
	// "spec.domain.devices.interfaces[0].ports[1].protocol".
	Field string
	// Message says what is wrong with it.
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Plan returns the interfaces of vmi the agent must wire: the one on the
// pod network (spec.networks[j].pod, or the Multus network marked default,
// which takes the pod network's place) and those on Multus secondary
// networks, which take the bridge binding. An interface with no binding
// gets the bridge binding, as in KubeVirt. Errors are *FieldError naming
// the offending field.
func Plan(vmi *v1.VirtualMachineInstance) ([]Interface, error) {
	if vmi == nil {
		return nil, fieldErrorf("vmi", "is nil")
	}
	if err := checkPodNetworks(vmi.Spec.Networks); err != nil {
		return nil, err
	}
	var plan []Interface
	podUser := -1
	for i := range vmi.Spec.Domain.Devices.Interfaces {
		iface := &vmi.Spec.Domain.Devices.Interfaces[i]
		j, ordinal, err := interfaceNetwork(vmi.Spec.Networks, iface, i)
		if err != nil {
			return nil, err
		}
		n := &vmi.Spec.Networks[j]
		primary := n.Pod != nil || n.Multus.Default
		if primary && podUser >= 0 {
			return nil, fieldErrorf(ifaceField(i, ""), "only one interface may use the pod network (%s %q already does)",
				ifaceField(podUser, ""), vmi.Spec.Domain.Devices.Interfaces[podUser].Name)
		}
		p, err := planInterface(iface, i)
		if err != nil {
			return nil, err
		}
		p.Tap = netnames.Tap(ordinal)
		if primary {
			podUser = i
		} else {
			p.Secondary = true
			p.PodInterface = netnames.SecondaryInterface(n.Name)
			p.Bridge = netnames.Bridge(p.PodInterface)
		}
		if p.Binding != BindingBridge && n.Pod == nil {
			return nil, fieldErrorf(ifaceField(i, bindingField(p.Binding)), "only supported on the pod network (network %q is a Multus network, which takes the bridge binding)", iface.Name)
		}
		if mq := vmi.Spec.Domain.Devices.NetworkInterfaceMultiQueue; mq != nil && *mq && (iface.Model == "" || iface.Model == v1.DefaultInterfaceModel) {
			p.MultiQueue = true
		}
		if n.Pod != nil {
			if err := checkGuestCIDR(p, n.Pod, j); err != nil {
				return nil, err
			}
		}
		plan = append(plan, p)
	}
	return plan, nil
}

// bindingField is the spec field of a binding Plan accepts.
func bindingField(binding string) string {
	if binding == BindingPasst {
		return "passtBinding"
	}
	return binding
}

// checkPodNetworks refuses networks that are neither or both pod and Multus,
// and more than one pod network.
func checkPodNetworks(nets []v1.Network) error {
	pods := 0
	for j := range nets {
		n := &nets[j]
		switch {
		case n.Pod != nil && n.Multus != nil:
			return fieldErrorf(netField(j), "may set only one of pod and multus")
		case n.Pod == nil && n.Multus == nil:
			return fieldErrorf(netField(j), "must set pod or multus")
		case n.Pod != nil || n.Multus.Default:
			pods++
			if pods > 1 {
				return fieldErrorf(netField(j), "only one network may be the pod network (a pod network, or a Multus network marked default)")
			}
		}
	}
	return nil
}

// interfaceNetwork returns the index in nets of iface's network and its
// ordinal: 0 for the pod network, N for the N-th Multus network in nets
// (domainxml names the taps the same way). It refuses an interface
// without a network.
func interfaceNetwork(nets []v1.Network, iface *v1.Interface, i int) (j, ordinal int, err error) {
	multus := 0
	for j := range nets {
		if nets[j].Multus != nil {
			multus++
		}
		if nets[j].Name != iface.Name {
			continue
		}
		if nets[j].Pod != nil {
			return j, 0, nil
		}
		return j, multus, nil
	}
	return 0, 0, fieldErrorf(ifaceField(i, "name"), "no network named %q in spec.networks", iface.Name)
}

// checkGuestCIDR refuses a masquerade guest network other than KubeVirt's
// defaults 10.0.2.0/24 and fd10:0:2::/120, the only ones Setup wires.
func checkGuestCIDR(p Interface, pod *v1.PodNetwork, j int) error {
	if p.Binding != BindingMasquerade {
		return nil
	}
	if pod.VMNetworkCIDR != "" && pod.VMNetworkCIDR != masqCIDR {
		return fieldErrorf(netField(j)+".pod.vmNetworkCIDR", "%q: vmkit supports only the default %s", pod.VMNetworkCIDR, masqCIDR)
	}
	if pod.VMIPv6NetworkCIDR != "" && pod.VMIPv6NetworkCIDR != masqCIDR6 {
		return fieldErrorf(netField(j)+".pod.vmIPv6NetworkCIDR", "%q: vmkit supports only the default %s", pod.VMIPv6NetworkCIDR, masqCIDR6)
	}
	return nil
}

// planInterface turns a pod-network interface into what the agent wires.
func planInterface(iface *v1.Interface, i int) (Interface, error) {
	binding, err := podBinding(&iface.InterfaceBindingMethod, i)
	if err != nil {
		return Interface{}, err
	}
	p := Interface{
		Name:         iface.Name,
		Index:        i,
		Binding:      binding,
		PodInterface: netnames.PodNetworkInterface,
		Tap:          netnames.Tap(0),
		Bridge:       netnames.Bridge(netnames.PodNetworkInterface),
	}
	if p.MAC, err = parseMAC(iface.MacAddress, ifaceField(i, "macAddress")); err != nil {
		return Interface{}, err
	}
	ports, err := normalizePorts(iface.Ports, i)
	if err != nil {
		return Interface{}, err
	}
	if binding == BindingMasquerade || binding == BindingPasst {
		p.Ports = ports
	}
	if p.DHCP, err = planDHCPOptions(iface.DHCPOptions, i); err != nil {
		return Interface{}, err
	}
	return p, nil
}

// podBinding returns the binding of a pod-network interface: masquerade,
// bridge, passt, or bridge when none is set.
func podBinding(b *v1.InterfaceBindingMethod, i int) (string, error) {
	var set []string
	for _, c := range [...]struct {
		on   bool
		name string
	}{
		{b.Bridge != nil, BindingBridge},
		{b.Masquerade != nil, BindingMasquerade},
		{b.Slirp != nil, "slirp"},
		{b.SRIOV != nil, "sriov"},
		{b.Macvtap != nil, "macvtap"},
		{b.Passt != nil, "passt plugin"},
		{b.PasstBinding != nil, BindingPasst},
		{b.Binding != nil, "plugin"},
	} {
		if c.on {
			set = append(set, c.name)
		}
	}
	switch {
	case len(set) == 0:
		return BindingBridge, nil
	case len(set) > 1:
		return "", fieldErrorf(ifaceField(i, ""), "may set only one binding (has %v)", set)
	case set[0] == BindingBridge, set[0] == BindingMasquerade, set[0] == BindingPasst:
		return set[0], nil
	case set[0] == "plugin":
		return "", fieldErrorf(ifaceField(i, ""), "binding plugin %q is not supported by vmkit; use masquerade, bridge or passtBinding", b.Binding.Name)
	}
	return "", fieldErrorf(ifaceField(i, ""), "binding %s is not supported by vmkit; use masquerade, bridge or passtBinding", set[0])
}

// parseMAC parses a spec MAC address; "" is nil.
func parseMAC(s, field string) (net.HardwareAddr, error) {
	if s == "" {
		return nil, nil
	}
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, fieldErrorf(field, "%q is not a 48-bit MAC address", s)
	}
	if mac[0]&1 != 0 {
		return nil, fieldErrorf(field, "%q is a multicast address", s)
	}
	return mac, nil
}

// normalizePorts checks the ports and fills in the default protocol, TCP.
func normalizePorts(ports []v1.Port, i int) ([]v1.Port, error) {
	if len(ports) == 0 {
		return nil, nil
	}
	out := make([]v1.Port, len(ports))
	for k, p := range ports {
		field := ifaceField(i, "ports["+strconv.Itoa(k)+"]")
		if p.Port < 1 || p.Port > 65535 {
			return nil, fieldErrorf(field+".port", "%d is not in 1..65535", p.Port)
		}
		switch p.Protocol {
		case "":
			p.Protocol = "TCP"
		case "TCP", "UDP":
		default:
			return nil, fieldErrorf(field+".protocol", "%q is not TCP or UDP", p.Protocol)
		}
		out[k] = p
	}
	return out, nil
}

func ifaceField(i int, sub string) string {
	f := "spec.domain.devices.interfaces[" + strconv.Itoa(i) + "]"
	if sub != "" {
		f += "." + sub
	}
	return f
}

func netField(j int) string { return "spec.networks[" + strconv.Itoa(j) + "]" }
