package network

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// bridgeServerIP is the DHCP server's link-local address on the bridge of
// the bridge binding: 169.254.75.10 on k6t-eth0, 169.254.75.(11+i) on the
// bridge of interface i on a secondary network.
func bridgeServerIP(iface Interface) (net.IPNet, error) {
	last := 10
	if iface.Secondary {
		last = 11 + iface.Index
	}
	if last > 254 {
		return net.IPNet{}, fmt.Errorf("interface %d: the bridge binding serves DHCP to the first 244 interfaces only", iface.Index)
	}
	return net.IPNet{IP: net.IPv4(169, 254, 75, byte(last)).To4(), Mask: net.CIDRMask(32, 32)}, nil
}

// bridge wires KubeVirt's bridge binding: the pod interface's IPv4 address
// moves to the guest, which sits on bridge k6t-eth0 together with eth0, and
// the guest takes eth0's MAC unless the spec gives one. On a secondary
// network the same happens with pod<hash> on k6t-<hash>; when that pod
// interface has no IPv4 address (a layer-2 network: the
// NetworkAttachmentDefinition has no IPAM), the guest gets the bridge and
// no DHCP lease, as in KubeVirt.
func (w *wirer) bridge(iface Interface) (Result, error) {
	pod, err := w.podLink(iface.PodInterface)
	if err != nil {
		return Result{}, err
	}
	mtu, err := mtu16(pod)
	if err != nil {
		return Result{}, err
	}
	br, rec, err := w.recordedBridge(iface, pod)
	if err != nil {
		return Result{}, err
	}
	guestMAC := iface.MAC
	if guestMAC == nil {
		guestMAC = rec.MAC
	}
	serverIP, err := bridgeServerIP(iface)
	if err != nil {
		return Result{}, err
	}
	res := bridgeResult(iface, rec, serverIP.IP, guestMAC, mtu)
	steps := []func() error{func() error { return w.freeMAC(pod, guestMAC) }}
	if rec.IP.IP != nil {
		if err := res.Lease.Validate(); err != nil {
			return Result{}, fmt.Errorf("%s's address and routes: %w", iface.PodInterface, err)
		}
		steps = append(steps,
			func() error { return w.clearIPv4(pod) },
			func() error { return w.ensureAddr(br, serverIP) })
	}
	if res.Lease6 != nil {
		if err := res.Lease6.Validate(); err != nil {
			return Result{}, fmt.Errorf("%s's IPv6 address: %w", iface.PodInterface, err)
		}
		steps = append(steps, func() error { return w.clearIPv6(pod) })
	}
	steps = append(steps,
		func() error { return w.setMaster(pod, br) },
		func() error { return w.learningOff(pod) },
		func() error { return w.ensureTap(iface.Tap, iface.MultiQueue, int(mtu), br) },
		func() error { return w.setUp(br) },
		func() error { return w.setUp(pod) })
	if res.Lease6 != nil {
		steps = append(steps, func() error { return w.routeGuest6(iface, br, rec) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return Result{}, err
		}
		if pod, err = w.podLink(iface.PodInterface); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// recordedBridge returns bridge k6t-eth0 and what the pod interface had
// before Setup took it: from the bridge's alias when an earlier Setup made
// it, else read from the pod interface and recorded on a new bridge.
func (w *wirer) recordedBridge(iface Interface, pod netlink.Link) (netlink.Link, podRecord, error) {
	br, err := w.link(iface.Bridge)
	if err != nil {
		return nil, podRecord{}, err
	}
	if br != nil {
		if rec, err := parseRecord(br.Attrs().Alias); err == nil {
			if br.Type() != "bridge" {
				return nil, podRecord{}, fmt.Errorf("%s exists and is a %s device, not a bridge", iface.Bridge, br.Type())
			}
			return br, rec, nil
		}
	}
	rec, err := w.readPod(pod, iface.Secondary)
	if err != nil {
		return nil, podRecord{}, err
	}
	alias := rec.String()
	if len(alias) > maxAlias {
		return nil, podRecord{}, fmt.Errorf("recording %s's addresses and routes on %s: %d bytes, more than an alias holds (%d): too many routes", pod.Attrs().Name, iface.Bridge, len(alias), maxAlias)
	}
	if br, err = w.ensureBridge(iface.Bridge, pod.Attrs().MTU, alias, nil); err != nil {
		return nil, podRecord{}, err
	}
	if br.Attrs().Alias != alias {
		if err := w.h.LinkSetAlias(br, alias); err != nil {
			return nil, podRecord{}, fmt.Errorf("recording %s's addresses on %s: %w", pod.Attrs().Name, iface.Bridge, err)
		}
	}
	return br, rec, nil
}

// readPod reads what the bridge binding hands to the guest: the pod
// interface's first global IPv4 address, its MAC, default gateway and
// other routes. A secondary network's pod interface may have no IPv4
// address: the record then holds only the MAC.
func (w *wirer) readPod(pod netlink.Link, secondary bool) (podRecord, error) {
	name := pod.Attrs().Name
	addrs, err := w.globalAddrs(pod)
	if err != nil {
		return podRecord{}, err
	}
	rec := podRecord{MAC: append(net.HardwareAddr(nil), pod.Attrs().HardwareAddr...)}
	if len(rec.MAC) != 6 {
		return podRecord{}, fmt.Errorf("%s has MAC %q, not a 48-bit one", name, rec.MAC)
	}
	if err := w.readPod6(pod, addrs, &rec); err != nil {
		return podRecord{}, err
	}
	if len(addrs) == 0 || addrs[0].IP.To4() == nil {
		if secondary {
			return rec, nil
		}
		return podRecord{}, fmt.Errorf("%s has no IPv4 address to give the guest", name)
	}
	rec.IP = net.IPNet{IP: addrs[0].IP.To4(), Mask: addrs[0].Mask}
	routes, err := w.h.RouteList(pod, netlink.FAMILY_V4)
	if err != nil {
		return podRecord{}, fmt.Errorf("reading routes of %s: %w", name, err)
	}
	rec.Gateway, rec.Routes = splitRoutes(routes, rec.IP)
	return rec, nil
}

// readPod6 records the pod interface's first global IPv6 address and its
// IPv6 default gateway, which the guest gets on a dual-stack pod.
func (w *wirer) readPod6(pod netlink.Link, addrs []netlink.Addr, rec *podRecord) error {
	for _, a := range addrs {
		if a.IP.To4() == nil {
			rec.IP6 = net.IPNet{IP: a.IP, Mask: a.Mask}
			break
		}
	}
	if rec.IP6.IP == nil {
		return nil
	}
	routes, err := w.h.RouteList(pod, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("reading IPv6 routes of %s: %w", pod.Attrs().Name, err)
	}
	for _, r := range routes {
		if (r.Dst == nil || maskOnes(r.Dst.Mask) == 0) && r.Gw != nil {
			rec.Gateway6 = r.Gw
			break
		}
	}
	return nil
}

// splitRoutes returns the default route's gateway and the other routes of
// the pod interface, leaving out the route to its own subnet, which the
// guest derives from its address.
func splitRoutes(routes []netlink.Route, addr net.IPNet) (net.IP, []dhcp.Route) {
	var gw net.IP
	var out []dhcp.Route
	subnet := net.IPNet{IP: addr.IP.Mask(addr.Mask), Mask: addr.Mask}
	for _, r := range routes {
		isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && maskOnes(r.Dst.Mask) == 0)
		switch {
		case r.Type != 0 && r.Type != unix.RTN_UNICAST:
		case isDefault && gw == nil && r.Gw != nil:
			gw = r.Gw.To4()
		case isDefault:
		case r.Gw == nil && r.Dst.String() == subnet.String():
		default:
			route := dhcp.Route{Dest: net.IPNet{IP: r.Dst.IP.To4(), Mask: r.Dst.Mask}}
			if r.Gw != nil {
				route.Gateway = r.Gw.To4()
			}
			out = append(out, route)
		}
	}
	return gw, out
}

func maskOnes(m net.IPMask) int {
	ones, _ := m.Size()
	return ones
}

// freeMAC gives the pod interface a random locally administered MAC when it
// has the guest's, which must be the guest's alone on the pod network.
func (w *wirer) freeMAC(pod netlink.Link, guest net.HardwareAddr) error {
	if !bytes.Equal(pod.Attrs().HardwareAddr, guest) {
		return nil
	}
	mac, err := randomMAC()
	if err != nil {
		return err
	}
	name := pod.Attrs().Name
	if err := w.h.LinkSetDown(pod); err != nil {
		return fmt.Errorf("bringing %s down: %w", name, err)
	}
	if err := w.h.LinkSetHardwareAddr(pod, mac); err != nil {
		return fmt.Errorf("setting MAC %s on %s: %w", mac, name, err)
	}
	return nil
}

// randomMAC is a random unicast, locally administered MAC.
func randomMAC() (net.HardwareAddr, error) {
	mac := make(net.HardwareAddr, 6)
	if _, err := rand.Read(mac); err != nil {
		return nil, fmt.Errorf("making a random MAC: %w", err)
	}
	mac[0] = mac[0]&^0x01 | 0x02
	return mac, nil
}

// clearIPv4 removes the pod interface's IPv4 addresses and routes: they
// belong to the guest now.
func (w *wirer) clearIPv4(pod netlink.Link) error {
	name := pod.Attrs().Name
	addrs, err := w.h.AddrList(pod, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("reading addresses of %s: %w", name, err)
	}
	for i := range addrs {
		if err := w.h.AddrDel(pod, &addrs[i]); err != nil {
			return fmt.Errorf("removing %s from %s: %w", addrs[i].IPNet, name, err)
		}
	}
	routes, err := w.h.RouteList(pod, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("reading routes of %s: %w", name, err)
	}
	for i := range routes {
		if err := w.h.RouteDel(&routes[i]); err != nil {
			return fmt.Errorf("removing route %s from %s: %w", routes[i], name, err)
		}
	}
	return nil
}

// clearIPv6 removes the pod interface's global IPv6 addresses and its IPv6
// routes but the link-local one: they belong to the guest now.
func (w *wirer) clearIPv6(pod netlink.Link) error {
	name := pod.Attrs().Name
	addrs, err := w.h.AddrList(pod, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("reading IPv6 addresses of %s: %w", name, err)
	}
	for i := range addrs {
		if addrs[i].Scope != unix.RT_SCOPE_UNIVERSE {
			continue
		}
		if err := w.h.AddrDel(pod, &addrs[i]); err != nil {
			return fmt.Errorf("removing %s from %s: %w", addrs[i].IPNet, name, err)
		}
	}
	routes, err := w.h.RouteList(pod, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("reading IPv6 routes of %s: %w", name, err)
	}
	for i := range routes {
		if routes[i].Dst != nil && routes[i].Dst.IP.IsLinkLocalUnicast() {
			continue
		}
		if err := w.h.RouteDel(&routes[i]); err != nil {
			return fmt.Errorf("removing route %s from %s: %w", routes[i], name, err)
		}
	}
	return nil
}

// routeGuest6 makes the pod the IPv6 router the node agent's
// advertisements name (the guest's default route, through the bridge's
// link-local address): the pod's prefix is on the bridge and its default route goes to
// the pod's gateway there, so what the guest sends the pod leaves again
// on the same link (with a redirect that sends the guest straight to the
// gateway next time). Nothing leaves the pod for the pod network but the
// guest's own traffic: the bridge filter keeps the advertisements and the
// DHCPv6 answers meant for the guest off it.
func (w *wirer) routeGuest6(iface Interface, br netlink.Link, rec podRecord) error {
	if err := inNamespace(w.ns, func() error { return enableRouting6(iface.Bridge) }); err != nil {
		return err
	}
	prefix := &net.IPNet{IP: rec.IP6.IP.Mask(rec.IP6.Mask), Mask: rec.IP6.Mask}
	routes := []netlink.Route{{LinkIndex: br.Attrs().Index, Dst: prefix}}
	if rec.Gateway6 != nil {
		routes = append(routes, netlink.Route{LinkIndex: br.Attrs().Index, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: rec.Gateway6})
	}
	for i := range routes {
		if err := w.h.RouteReplace(&routes[i]); err != nil {
			return fmt.Errorf("routing %s through %s: %w", routes[i].Dst, iface.Bridge, err)
		}
	}
	return installGuestFilter(int(w.ns), iface.PodInterface)
}

// bridgeResult is what the bridge binding reports: the lease of the pod
// interface's address, or none (Lease.IP.IP nil) when it had none.
func bridgeResult(iface Interface, rec podRecord, serverIP net.IP, guestMAC net.HardwareAddr, mtu uint16) Result {
	r := Result{Interface: iface.Name, MAC: guestMAC.String()}
	if rec.IP.IP == nil {
		return r
	}
	r.Lease = dhcp.Lease{
		ServerInterface: iface.Bridge,
		ServerIP:        serverIP,
		ClientMAC:       guestMAC,
		IP:              rec.IP,
		Router:          rec.Gateway,
		MTU:             mtu,
		Routes:          rec.Routes,
	}
	r.PodIPs = []string{rec.IP.IP.String()}
	if rec.IP6.IP != nil {
		ones, _ := rec.IP6.Mask.Size()
		r.Lease6 = &dhcp.Lease6{ServerInterface: iface.Bridge, IP: rec.IP6.IP, PrefixLen: ones, MTU: mtu}
		r.PodIPs = append(r.PodIPs, rec.IP6.IP.String())
	}
	iface.DHCP.apply(&r.Lease)
	return r
}
