package network

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// link returns the device name, or nil when there is none.
func (w *wirer) link(name string) (netlink.Link, error) {
	l, err := w.h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return l, nil
}

// podLink returns the pod network's device, which must exist.
func (w *wirer) podLink(name string) (netlink.Link, error) {
	l, err := w.link(name)
	if err == nil && l == nil {
		err = fmt.Errorf("reading %s: no such device (is the pod on a pod network?)", name)
	}
	return l, err
}

// ensureBridge returns bridge name, creating it with mtu, alias and, unless
// nil, MAC mac when it does not exist.
func (w *wirer) ensureBridge(name string, mtu int, alias string, mac net.HardwareAddr) (netlink.Link, error) {
	l, err := w.link(name)
	if err != nil {
		return nil, err
	}
	if l == nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.Alias, attrs.HardwareAddr = name, mtu, alias, mac
		if err := w.h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			return nil, fmt.Errorf("creating %s: %w", name, err)
		}
		if l, err = w.link(name); err == nil && l == nil {
			err = fmt.Errorf("creating %s: gone after creation", name)
		}
		return l, err
	}
	if l.Type() != "bridge" {
		return nil, fmt.Errorf("%s exists and is a %s device, not a bridge", name, l.Type())
	}
	return l, nil
}

// ensureAddr gives l the address a, unless it has it.
func (w *wirer) ensureAddr(l netlink.Link, a net.IPNet) error {
	family, flags := netlink.FAMILY_V4, 0
	if a.IP.To4() == nil {
		// No duplicate address detection: the address is the pod's
		// own, on a link only the guest shares, and the advertisements
		// wait for nothing.
		family, flags = netlink.FAMILY_V6, unix.IFA_F_NODAD
	}
	addrs, err := w.h.AddrList(l, family)
	if err != nil {
		return fmt.Errorf("reading addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, have := range addrs {
		if have.IP.Equal(a.IP) && have.Mask.String() == a.Mask.String() {
			return nil
		}
	}
	if err := w.h.AddrAdd(l, &netlink.Addr{IPNet: &a, Flags: flags}); err != nil {
		return fmt.Errorf("adding %s to %s: %w", a.String(), l.Attrs().Name, err)
	}
	return nil
}

// ensureTap makes the persistent tap name, owned by the launcher's user,
// multi-queue or not, with mtu, a port of bridge and up.
func (w *wirer) ensureTap(name string, multiQueue bool, mtu int, bridge netlink.Link) error {
	l, err := w.link(name)
	if err != nil {
		return err
	}
	if l == nil {
		uid, gid := w.opts.TapOwner, w.opts.TapGroup
		if err := inNamespace(w.ns, func() error { return createTap(name, multiQueue, uid, gid) }); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		if l, err = w.link(name); err == nil && l == nil {
			err = fmt.Errorf("creating %s: gone after creation", name)
		}
		if err != nil {
			return err
		}
	}
	if err := w.checkTap(l, multiQueue); err != nil {
		return err
	}
	if l.Attrs().MTU != mtu {
		if err := w.h.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("setting MTU %d on %s: %w", mtu, name, err)
		}
	}
	if err := w.setMaster(l, bridge); err != nil {
		return err
	}
	return w.setUp(l)
}

// checkTap refuses a device that is not the tap Setup makes.
func (w *wirer) checkTap(l netlink.Link, multiQueue bool) error {
	name := l.Attrs().Name
	tap, ok := l.(*netlink.Tuntap)
	if !ok || tap.Mode != netlink.TUNTAP_MODE_TAP {
		return fmt.Errorf("%s exists and is not a tap device", name)
	}
	if got := tap.Flags&netlink.TUNTAP_MULTI_QUEUE != 0; got != multiQueue {
		return fmt.Errorf("%s exists with multi-queue %v, want %v", name, got, multiQueue)
	}
	if tap.NonPersist {
		return fmt.Errorf("%s exists and is not persistent", name)
	}
	if int(tap.Owner) != w.opts.TapOwner || int(tap.Group) != w.opts.TapGroup {
		return fmt.Errorf("%s exists owned by %d:%d, not %d:%d", name, tap.Owner, tap.Group, w.opts.TapOwner, w.opts.TapGroup)
	}
	return nil
}

// setMaster makes l a port of bridge, unless it is.
func (w *wirer) setMaster(l, bridge netlink.Link) error {
	if l.Attrs().MasterIndex == bridge.Attrs().Index {
		return nil
	}
	if err := w.h.LinkSetMaster(l, bridge); err != nil {
		return fmt.Errorf("adding %s to %s: %w", l.Attrs().Name, bridge.Attrs().Name, err)
	}
	return nil
}

// learningOff stops bridge port l from learning MAC addresses, as KubeVirt
// does for the pod interface in the bridge binding: the node's bridge may
// send a pod's own broadcasts back to it (hairpin mode, which the CNI bridge
// plugin turns on for Services), and the guest's ARP coming back in through
// eth0 would move the guest's MAC from tap0 to eth0 in k6t-eth0's table, which
// then drops what the node sends the guest until the guest sends again.
// Frames to the guest still reach it: k6t-eth0 learns its MAC on tap0.
func (w *wirer) learningOff(l netlink.Link) error {
	if err := w.h.LinkSetLearning(l, false); err != nil {
		return fmt.Errorf("turning MAC learning off on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// setUp brings l up, unless it is.
func (w *wirer) setUp(l netlink.Link) error {
	if l.Attrs().Flags&net.FlagUp != 0 {
		return nil
	}
	if err := w.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("bringing %s up: %w", l.Attrs().Name, err)
	}
	return nil
}

// globalAddrs returns l's global addresses, IPv4 first.
func (w *wirer) globalAddrs(l netlink.Link) ([]netlink.Addr, error) {
	var out []netlink.Addr
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := w.h.AddrList(l, family)
		if err != nil {
			return nil, fmt.Errorf("reading addresses of %s: %w", l.Attrs().Name, err)
		}
		for _, a := range addrs {
			if a.Scope == unix.RT_SCOPE_UNIVERSE {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

func ipStrings(addrs []netlink.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.IP.String())
	}
	return out
}
