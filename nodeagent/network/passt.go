package network

import (
	"fmt"
	"os"
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
	if len(iface.Ports) == 0 && w.opts.OpenFileLimit > 0 {
		if err := w.checkAllPorts(iface); err != nil {
			return Result{}, err
		}
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

// checkAllPorts refuses forwarding every port when the launcher's open-file
// limit cannot hold a socket for each port outside the pod's ephemeral range,
// for each protocol: passt would fail at start ("Can't open enough sockets
// for port specifier: all").
func (w *wirer) checkAllPorts(iface Interface) error {
	lo, hi := 32768, 60999 // Linux's default ephemeral range
	err := inNamespace(w.ns, func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
		if err != nil {
			return err
		}
		if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo > hi {
			return fmt.Errorf("ip_local_port_range %q: %v", strings.TrimSpace(string(b)), err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the pod's ephemeral port range: %w", err)
	}
	need := uint64(2*(65535-(hi-lo+1))) + 256 // and some for passt itself
	if w.opts.OpenFileLimit < need {
		return fieldErrorf(ifaceField(iface.Index, "ports"), "none listed, so passt would forward every TCP and UDP port, a socket each (about %d open files), and the launcher pod may open only %d: list the ports the guest serves", need, w.opts.OpenFileLimit)
	}
	return nil
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
