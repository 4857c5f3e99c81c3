package network

import (
	"slices"
	"strconv"
	"strings"
)

// passt reads what the passtBinding reports from the pod and wires nothing:
// passt, which the launcher runs in the pod as its own user, copies eth0's
// address, routes and MTU to the guest, answers its DHCP with the pod's name
// servers and search domains, and forwards the pod's ports to it. No tap,
// bridge or nftables rule, and nothing needs privilege.
func (w *wirer) passt(iface Interface) (Result, error) {
	pod, err := w.podLink(iface.PodInterface)
	if err != nil {
		return Result{}, err
	}
	addrs, err := w.globalAddrs(pod)
	if err != nil {
		return Result{}, err
	}
	r := Result{Interface: iface.Name, PodIPs: ipStrings(addrs), Passt: true}
	if len(addrs) > 0 && addrs[0].IP.To4() != nil {
		r.Lease.IP = *addrs[0].IPNet
	}
	if iface.MAC != nil {
		r.MAC = iface.MAC.String()
	}
	return r, nil
}

// PasstArgs are passt's port-forwarding arguments for a passt interface, as
// KubeVirt's passt binding forwards: each listed port to the same port of
// the guest, only the listed protocols; every port of both protocols when
// none is listed. passt binds a socket per forwarded port in the pod, so
// forwarding everything takes a socket for every port outside the
// ephemeral range, for each protocol (about 75,000 with Linux's defaults).
func PasstArgs(iface Interface) []string {
	if len(iface.Ports) == 0 {
		return []string{"--tcp-ports", "all", "--udp-ports", "all"}
	}
	var tcp, udp []string
	for _, p := range iface.Ports {
		n, list := strconv.Itoa(int(p.Port)), &tcp
		if p.Protocol == "UDP" {
			list = &udp
		}
		if !slices.Contains(*list, n) { // passt refuses a port given twice
			*list = append(*list, n)
		}
	}
	list := func(ports []string) string {
		if len(ports) == 0 {
			return "none"
		}
		return strings.Join(ports, ",")
	}
	return []string{"--tcp-ports", list(tcp), "--udp-ports", list(udp)}
}

// PasstInterface returns the VMI's interface with the passt binding from a
// plan, and whether there is one.
func PasstInterface(plan []Interface) (Interface, bool) {
	for _, iface := range plan {
		if iface.Binding == BindingPasst {
			return iface, true
		}
	}
	return Interface{}, false
}
