package network

import (
	"net"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// masquerade wires KubeVirt's masquerade binding: the guest sits at
// 10.0.2.2/24 behind bridge k6t-eth0 (10.0.2.1), and nftables NATs between
// it and the pod's own addresses, which stay on eth0. When the pod has an
// IPv6 address, the guest is at fd10:0:2::2 behind fd10:0:2::1 as well,
// with the same NAT in table ip6 nat.
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
	if res.Lease6 != nil {
		if err := res.Lease6.Validate(); err != nil {
			return Result{}, err
		}
	}
	br, err := w.ensureBridge(iface.Bridge, int(mtu), "", masqBridgeMAC())
	if err != nil {
		return Result{}, err
	}
	if err := w.ensureAddr(br, net.IPNet{IP: masqGatewayIP(), Mask: masqMask()}); err != nil {
		return Result{}, err
	}
	if res.Lease6 != nil {
		if err := w.ensureAddr(br, net.IPNet{IP: masqGatewayIP6(), Mask: net.CIDRMask(masqPrefixLen6, 128)}); err != nil {
			return Result{}, err
		}
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
	if err := installNAT(int(w.ns), masqueradeRuleset(iface, false)); err != nil {
		return Result{}, err
	}
	if res.Lease6 != nil {
		if err := inNamespace(w.ns, func() error { return enableRouting6(iface.Bridge) }); err != nil {
			return Result{}, err
		}
		if err := installNAT(int(w.ns), masqueradeRuleset(iface, true)); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// enableRouting6 lets the pod forward IPv6 between eth0 and the guest. A
// forwarding pod ignores router advertisements, as a router does; its pod
// interface keeps the routes its CNI plugin installed. The bridge skips
// duplicate address detection, so its link-local address, the source of
// the guest's advertisements, is usable as soon as the guest's tap is.
func enableRouting6(bridge string) error {
	if err := setSysctl("net/ipv6/conf/"+bridge+"/accept_dad", "0"); err != nil {
		return err
	}
	return setSysctl("net/ipv6/conf/all/forwarding", "1")
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
	// The guest gets IPv6 when the pod has it, as on KubeVirt.
	for _, ip := range podIPs {
		if parsed := net.ParseIP(ip); parsed != nil && parsed.To4() == nil {
			r.Lease6 = &dhcp.Lease6{ServerInterface: iface.Bridge, IP: masqGuestIP6(), PrefixLen: masqPrefixLen6, MTU: mtu}
			break
		}
	}
	iface.DHCP.apply(&r.Lease)
	if iface.MAC != nil {
		r.MAC = iface.MAC.String()
	}
	return r
}
