package restapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Port forwarding: GET .../portforward/{port}[/{protocol}] is a WebSocket
// whose binary messages carry a connection the agent opens to the guest's
// port (tcp, the default) or the datagrams it exchanges with it (udp: one
// message per datagram, up to 32 KiB).
//
// Where the agent dials: only an address it wired itself, never one the
// VMI's status holds (a user may write status at creation where the
// admission policy is not installed, and the guest's own agent reports
// interfaces: 127.0.0.1, the cluster's Service IPs, other tenants' pods
// would all be reachable from the privileged agent's network namespace).
//
//   - The pod network interface uses the masquerade binding: the guest is
//     dialed at its address behind the NAT, masqueradeGuestIP, from inside
//     the launcher pod's network namespace (/proc/<launcher pid>/ns/net, the
//     one nodeagent/network wires), as KubeVirt's virt-handler dials inside
//     the pod: every port of the guest is reachable, not only those of
//     spec.domain.devices.interfaces[].ports that the pod forwards.
//   - The pod network interface uses the bridge binding: the guest holds the
//     pod's IP, which the agent took from the pod interface when it wired it
//     (network.Result's lease); that address is dialed from the node, as any
//     pod IP is reached. After an agent restart the wiring is read back from
//     the pod's namespace (network.Setup changes nothing on a wired one).
//   - A VMI without a pod network interface, or whose launcher shares the
//     node's network namespace, has no address the agent can vouch for:
//     409 "VMI has no pod network address".
//
// Whatever the binding, the address must be a unicast IP outside loopback
// and link-local ranges. A port outside 1-65535 or a protocol other than
// tcp and udp is a 400; a guest that refuses the connection (nothing
// listens, a firewall) a 502.

// masqueradeGuestIP is the guest's address behind the masquerade binding's
// NAT: KubeVirt's default guest network 10.0.2.0/24, the only one
// nodeagent/network wires.
const masqueradeGuestIP = "10.0.2.2"

// errNoIP is the REST API's answer for a VMI without an address the agent
// wired itself.
const errNoIP = "VMI has no pod network address"

// dialTimeout bounds the agent's connection to the guest.
const dialTimeout = 10 * time.Second

// forwardTarget is where the agent dials a guest's port.
type forwardTarget struct {
	// IP is the guest's address.
	IP string
	// NetNS is the network namespace to dial in (/proc/<pid>/ns/net of the
	// launcher); "" for the agent's own.
	NetNS string
}

func (s *server) servePortForward(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.ParseUint(r.PathValue("port"), 10, 16)
	if err != nil || port == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid port %q: want 1-65535", r.PathValue("port")))
		return
	}
	proto := r.PathValue("protocol")
	if proto == "" {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported protocol %q: want tcp or udp", proto))
		return
	}
	vmi, c, ok := s.vmiOf(w, r, nil)
	if !ok {
		return
	}
	target, err := s.forwardTarget(r.Context(), vmi, c)
	if err != nil {
		writeLauncherError(w, err)
		return
	}
	if target.IP == "" {
		writeError(w, http.StatusConflict, errNoIP)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
	defer cancel()
	if err := checkDialable(target.IP); err != nil {
		writeError(w, http.StatusConflict, "port-forward: "+err.Error())
		return
	}
	conn, err := dialGuest(ctx, target, proto, int(port))
	if err != nil {
		writeError(w, http.StatusBadGateway, "connecting to the guest: "+err.Error())
		return
	}
	serveStream(w, r, conn)
}

// forwardTarget decides where to dial the VMI's guest (see the comment at
// the top of the file). Its IP is empty when the agent has no address it
// wired itself.
func (s *server) forwardTarget(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) (forwardTarget, error) {
	plan, err := network.Plan(vmi)
	if err != nil || len(plan) == 0 {
		return forwardTarget{}, nil
	}
	netNS := s.netNS
	if netNS == nil {
		netNS = launcherNetNS
	}
	pid, ns, err := netNS(ctx, c)
	if err != nil || ns == "" {
		return forwardTarget{}, err
	}
	i := slices.IndexFunc(plan, func(p network.Interface) bool { return !p.Secondary })
	if i < 0 { // only secondary networks
		return forwardTarget{}, nil
	}
	iface := plan[i]
	switch iface.Binding {
	case network.BindingMasquerade:
		return forwardTarget{IP: masqueradeGuestIP, NetNS: ns}, nil
	case network.BindingBridge:
		wired, err := s.b.WiredNetwork(ctx, vmi, pid)
		if err != nil {
			return forwardTarget{}, err
		}
		for _, r := range wired {
			if r.Interface == iface.Name && r.Lease.IP.IP != nil {
				return forwardTarget{IP: r.Lease.IP.IP.String()}, nil
			}
		}
	}
	return forwardTarget{}, nil
}

// checkDialable refuses an address the agent must never dial for a guest:
// anything but a unicast IP literal outside loopback, link-local and
// unspecified (the node's own services, cloud metadata).
func checkDialable(addr string) error {
	ip := net.ParseIP(addr)
	switch {
	case ip == nil:
		return fmt.Errorf("%q is not an IP address", addr)
	case ip.IsLoopback(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast(), ip.Equal(net.IPv4bcast):
		return fmt.Errorf("%s is not a guest's address", addr)
	}
	return nil
}

// launcherNetNS returns the launcher's PID and the path of its network
// namespace; the path is "" when it is the agent's own or the agent cannot
// see the launcher's PID.
func launcherNetNS(ctx context.Context, c *client.Client) (int, string, error) {
	pid, err := c.PID(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("finding the launcher process: %w", err)
	}
	if pid <= 0 {
		return 0, "", nil
	}
	path := netNSPath(pid)
	same, err := network.SameNamespace(path)
	if err != nil || same {
		return 0, "", err
	}
	return pid, path, nil
}

// netNSPath is the network namespace of process pid.
func netNSPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/net" }

// dialGuest connects to the guest's port at target.
func dialGuest(ctx context.Context, target forwardTarget, proto string, port int) (net.Conn, error) {
	if err := checkDialable(target.IP); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(target.IP, strconv.Itoa(port))
	if target.NetNS == "" {
		var d net.Dialer
		return d.DialContext(ctx, proto, addr)
	}
	return dialInNamespace(ctx, target.NetNS, proto, addr)
}

// dialInNamespace connects to addr from inside the network namespace at
// nsPath: the socket is made on an OS thread switched into the namespace,
// where it stays once the thread switches back. A thread that cannot
// return to the agent's namespace is left locked, so the runtime ends it
// with its goroutine.
func dialInNamespace(ctx context.Context, nsPath, proto, addr string) (net.Conn, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", nsPath, err)
	}
	defer ns.Close()
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("reading own network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("entering network namespace %s: %w", nsPath, err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, proto, addr)
		if serr := netns.Set(orig); serr != nil {
			done <- result{conn, err} // the thread stays locked and ends with the goroutine
			return
		}
		runtime.UnlockOSThread()
		done <- result{conn, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("in network namespace %s: %w", nsPath, r.err)
	}
	return r.conn, nil
}
