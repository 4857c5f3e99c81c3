package network

import (
	"net"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// masquerade wires KubeVirt's masquerade binding: the guest sits at
// 10.0.2.2/24 behind bridge k6t-eth0 (10.0.2.1), and nftables NATs between
// it and the pod's own addresses, which stay on eth0.
func (w *wirer) masquerade(iface Interface) (Result, error) {
	pod, err := w.podLink(iface.PodInterface)
	if err != nil {
		return Result{}, err
	}
	mtu, err := mtu16(pod)
	if err != nil {
		return Result{}, err
	}
	addrs, err := w.globalAddrs(pod)
	if err != nil {
		return Result{}, err
	}
	res := masqueradeResult(iface, mtu, ipStrings(addrs))
	if err := res.Lease.Validate(); err != nil {
		return Result{}, err
	}
	br, err := w.ensureBridge(iface.Bridge, int(mtu), "")
	if err != nil {
		return Result{}, err
	}
	if err := w.ensureAddr(br, net.IPNet{IP: masqGatewayIP(), Mask: masqMask()}); err != nil {
		return Result{}, err
	}
	if err := w.ensureTap(iface.Tap, iface.MultiQueue, int(mtu), br); err != nil {
		return Result{}, err
	}
	if err := w.setUp(br); err != nil {
		return Result{}, err
	}
	if err := inNamespace(w.ns, enableRouting); err != nil {
		return Result{}, err
	}
	if err := installNAT(int(w.ns), masqueradeRuleset(iface)); err != nil {
		return Result{}, err
	}
	return res, nil
}

// enableRouting lets the pod forward between eth0 and the guest, and route
// connections to 127.0.0.1 that the output chain sent to the guest.
func enableRouting() error {
	if err := setSysctl("net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	return setSysctl("net/ipv4/conf/all/route_localnet", "1")
}

func masqueradeResult(iface Interface, mtu uint16, podIPs []string) Result {
	r := Result{
		Interface: iface.Name,
		Lease: dhcp.Lease{
			ServerInterface: iface.Bridge,
			ServerIP:        masqGatewayIP(),
			ClientMAC:       iface.MAC,
			IP:              net.IPNet{IP: masqGuestIP(), Mask: masqMask()},
			Router:          masqGatewayIP(),
			MTU:             mtu,
		},
		PodIPs: podIPs,
	}
	iface.DHCP.apply(&r.Lease)
	if iface.MAC != nil {
		r.MAC = iface.MAC.String()
	}
	return r
}
