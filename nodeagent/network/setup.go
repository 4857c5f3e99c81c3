package network

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// Options tune Setup.
type Options struct {
	TapOwner, TapGroup int // uid/gid owning the tap (the launcher's QEMU user; 0 root)
	// OpenFileLimit is the launcher's hard limit of open files, which the
	// passt it runs inherits; 0 when unknown. A passt interface that lists
	// no ports (every port forwarded, a socket each) is refused when it is
	// too low.
	OpenFileLimit uint64
}

// Result is what Setup did for one interface.
type Result struct {
	Interface string // spec name
	// PodInterface is the pod's device the interface is wired on ("eth0",
	// "pod<hash>"), status.interfaces[].podInterfaceName.
	PodInterface string
	Lease        dhcp.Lease // what the launcher's DHCP server must hand out (ServerInterface, ServerIP, ClientMAC, IP, Router, MTU, Routes filled; DNS/search/hostname are the launcher's job)
	// Lease6 is what the launcher's DHCPv6 server and the node agent's
	// router advertisements (Advertise) give the guest; nil when it gets
	// no IPv6 (the pod has none, or the binding gives none).
	Lease6 *dhcp.Lease6
	MAC    string   // guest MAC to report in status ("" when libvirt chooses)
	PodIPs []string // the pod's addresses (IPv4 first) for status.interfaces
	// Passt says passt, not the launcher's DHCP server, answers the guest:
	// Lease then holds only IP, the pod's address, which the guest gets.
	Passt bool
}

// Setup wires plan in the network namespace at nsPath (e.g.
// /proc/<pid>/ns/net), before the launcher starts the domain. It refuses the
// caller's own namespace (a launcher on the host network).
//
// Every step first looks at what is there, so Setup is idempotent: a second
// call on a namespace it already wired (a restarted agent) changes nothing
// and returns the same results, and a call after a failed one finishes the
// job. An error names the interface and the step, e.g.
// "spec.domain.devices.interfaces[0] (default): creating tap0: ...".
func Setup(nsPath string, plan []Interface, opts Options) ([]Result, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", nsPath, err)
	}
	defer ns.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return nil, fmt.Errorf("reading network namespace %s: %w", nsPath, err)
	}
	if same, err := isOwnNamespace(&st); err != nil || same {
		if err == nil {
			err = fmt.Errorf("network namespace %s is the agent's own (a launcher on the host network): refusing to wire it", nsPath)
		}
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("opening netlink in %s: %w", nsPath, err)
	}
	defer h.Close()

	w := &wirer{ns: ns, h: h, opts: opts}
	results := make([]Result, 0, len(plan))
	for _, iface := range plan {
		r, err := w.wire(iface)
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, err // it names the field already
		}
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", ifaceField(iface.Index, ""), iface.Name, err)
		}
		r.PodInterface = iface.PodInterface
		results = append(results, r)
	}
	return results, nil
}

// wirer wires interfaces in one network namespace.
type wirer struct {
	ns   netns.NsHandle
	h    *netlink.Handle
	opts Options
}

func (w *wirer) wire(iface Interface) (Result, error) {
	if err := checkDeviceNames(iface); err != nil {
		return Result{}, err
	}
	switch iface.Binding {
	case BindingMasquerade:
		return w.masquerade(iface)
	case BindingBridge:
		return w.bridge(iface)
	case BindingPasst:
		return w.passt(iface)
	}
	return Result{}, fmt.Errorf("binding %q is not %s, %s or %s", iface.Binding, BindingMasquerade, BindingBridge, BindingPasst)
}

// checkDeviceNames refuses device names the kernel would refuse or that
// clash.
func checkDeviceNames(iface Interface) error {
	for _, n := range []struct{ field, name string }{
		{"PodInterface", iface.PodInterface}, {"Tap", iface.Tap}, {"Bridge", iface.Bridge},
	} {
		if n.name == "" || len(n.name) > 15 {
			return fmt.Errorf("%s %q is not a network device name (1 to 15 bytes)", n.field, n.name)
		}
	}
	if iface.PodInterface == iface.Tap || iface.PodInterface == iface.Bridge || iface.Tap == iface.Bridge {
		return fmt.Errorf("PodInterface %q, Tap %q and Bridge %q must differ", iface.PodInterface, iface.Tap, iface.Bridge)
	}
	return nil
}

// mtu16 is a device's MTU as DHCP carries it.
func mtu16(l netlink.Link) (uint16, error) {
	mtu := l.Attrs().MTU
	if mtu < 68 || mtu > 65535 {
		return 0, fmt.Errorf("%s has MTU %d, outside 68..65535", l.Attrs().Name, mtu)
	}
	return uint16(mtu), nil
}

// Advertise sends the router advertisements of lease (a Result's Lease6)
// in the network namespace at nsPath until ctx ends (dhcp.Advertise): they
// make the pod the guest's IPv6 default router and tell its DHCPv6 client
// to ask the launcher. It needs CAP_NET_RAW in that namespace, which the
// node agent has and the launcher does not.
func Advertise(ctx context.Context, nsPath string, lease dhcp.Lease6) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", nsPath, err)
	}
	defer ns.Close()
	return inNamespace(ns, func() error { return dhcp.Advertise(ctx, lease) })
}
