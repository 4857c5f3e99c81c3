package nodeagent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/network"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Port forwarding: GET .../portforward/{port}[/{protocol}] is a WebSocket
// whose binary messages carry a connection the agent opens to the guest's
// port (tcp, the default) or the datagrams it exchanges with it (udp: one
// message per datagram, up to 32 KiB).
//
// Where the agent dials:
//
//   - A VMI whose pod network interface uses the masquerade binding is
//     dialed at its address behind the NAT, masqueradeGuestIP, from inside
//     the launcher pod's network namespace (/proc/<launcher pid>/ns/net, the
//     one nodeagent/network wires), as KubeVirt's virt-handler dials inside
//     the pod: every port of the guest is reachable, not only those of
//     spec.domain.devices.interfaces[].ports that the pod forwards.
//   - Any other VMI is dialed from the node at its IP in status.interfaces:
//     the pod network interface's (the one whose network has pod: {}),
//     else the first interface with an address. With the bridge binding
//     that is the pod IP, which the guest holds: every port is reachable.
//     A masquerade VMI whose launcher shares the node's network namespace
//     (nodeagent/localnode's launchers) is dialed this way too; through the
//     pod IP only the ports the pod forwards reach the guest.
//
// A VMI with no address to dial is a 409 "VMI has no IP address"; a port
// outside 1-65535 or a protocol other than tcp and udp a 400; a guest that
// refuses the connection (nothing listens, a firewall) a 502.

// masqueradeGuestIP is the guest's address behind the masquerade binding's
// NAT: KubeVirt's default guest network 10.0.2.0/24, the only one
// nodeagent/network wires.
const masqueradeGuestIP = "10.0.2.2"

// errNoIP is the REST API's answer for a VMI without an address.
const errNoIP = "VMI has no IP address"

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

func (a *Agent) servePortForward(w http.ResponseWriter, r *http.Request) {
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
	vmi, c, ok := a.vmiOf(w, r, nil)
	if !ok {
		return
	}
	target, err := a.forwardTarget(r.Context(), vmi, c)
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
	conn, err := dialGuest(ctx, target, proto, int(port))
	if err != nil {
		writeError(w, http.StatusBadGateway, "connecting to the guest: "+err.Error())
		return
	}
	serveStream(w, r, conn)
}

// forwardTarget decides where to dial the VMI's guest (see the comment at
// the top of the file). Its IP is empty when the VMI has no address.
func (a *Agent) forwardTarget(ctx context.Context, vmi *v1.VirtualMachineInstance, c *launcher.Client) (forwardTarget, error) {
	if plan, err := network.Plan(vmi); err == nil && len(plan) > 0 && plan[0].Binding == network.BindingMasquerade {
		ns, err := launcherNetNS(ctx, c)
		if err != nil {
			return forwardTarget{}, err
		}
		if ns != "" {
			return forwardTarget{IP: masqueradeGuestIP, NetNS: ns}, nil
		}
	}
	return forwardTarget{IP: guestIP(vmi)}, nil
}

// launcherNetNS returns the path of the launcher's network namespace, or ""
// when it is the agent's own or the agent cannot see the launcher's PID.
func launcherNetNS(ctx context.Context, c *launcher.Client) (string, error) {
	pid, err := c.PID(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the launcher process: %w", err)
	}
	if pid <= 0 {
		return "", nil
	}
	path := "/proc/" + strconv.Itoa(pid) + "/ns/net"
	same, err := network.SameNamespace(path)
	if err != nil || same {
		return "", err
	}
	return path, nil
}

// guestIP is the VMI's address in status.interfaces: the pod network
// interface's, else the first interface's that has one; "" when none has.
func guestIP(vmi *v1.VirtualMachineInstance) string {
	pod := ""
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod = n.Name
		}
	}
	first := ""
	for _, iface := range vmi.Status.Interfaces {
		if iface.IP == "" {
			continue
		}
		if pod != "" && iface.Name == pod {
			return iface.IP
		}
		if first == "" {
			first = iface.IP
		}
	}
	return first
}

// dialGuest connects to the guest's port at target.
func dialGuest(ctx context.Context, target forwardTarget, proto string, port int) (net.Conn, error) {
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
