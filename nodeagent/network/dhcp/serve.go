package dhcp

import (
	"context"
	"fmt"
	"net"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"k8s.io/klog/v2"
)

// Serve answers DHCP for lease on lease.ServerInterface until ctx ends, then
// returns nil. It listens on UDP 0.0.0.0:67 bound to that device
// (SO_BINDTODEVICE), so it hears the broadcasts of a client that has no
// address yet and nothing from other devices, and it answers each message
// with Reply, one at a time.
//
// Answers go to the client's port 68: broadcast to 255.255.255.255, as a
// client without an address needs and as RFC 2131 requires for a NAK, or
// unicast to the client's address when it sent from one (renewing).
//
// Serve runs in the network namespace of the calling thread: virt-launcher
// runs in the pod's. lease.ServerIP must be assigned to lease.ServerInterface
// (clients send renewals to it). Errors are an invalid lease, a device or
// socket that cannot be used, and a failed read; a failed send is logged
// and the client retries.
func Serve(ctx context.Context, lease Lease) error {
	if err := lease.Validate(); err != nil {
		return fmt.Errorf("dhcp serve: %w", err)
	}
	if err := checkServerAddr(lease.ServerInterface, lease.ServerIP); err != nil {
		return fmt.Errorf("dhcp serve: %w", err)
	}
	conn, err := server4.NewIPv4UDPConn(lease.ServerInterface, &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort})
	if err != nil {
		return fmt.Errorf("dhcp serve on %s: %w", lease.ServerInterface, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	log := klog.FromContext(ctx).WithValues("interface", lease.ServerInterface, "ip", lease.IP.String())
	log.V(2).Info("DHCP server listening")
	return serveUDP(ctx, log, conn, "dhcp serve on "+lease.ServerInterface, func(b []byte, peer net.Addr) (*outgoing, error) {
		req, err := dhcpv4.FromBytes(b)
		if err != nil {
			log.V(4).Info("ignoring a message that is not DHCP", "from", peer, "err", err)
			return nil, nil
		}
		resp, err := Reply(req, &lease)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			log.V(4).Info("not answering", "from", peer, "type", req.MessageType(), "mac", req.ClientHWAddr)
			return nil, nil
		}
		return &outgoing{data: resp.ToBytes(), to: replyAddr(peer, resp),
			log: []any{"type", req.MessageType(), "answer", resp.MessageType(), "mac", req.ClientHWAddr}}, nil
	})
}

// outgoing is what a server loop sends for one request: data to the
// address to, logged with the key-value pairs log.
type outgoing struct {
	data []byte
	to   net.Addr
	log  []any
}

// serveUDP reads requests from conn until ctx ends, then returns nil, and
// sends the answer handle makes of each (none when nil). A failed read, or
// an error from handle, ends it with the error prefixed with what; a
// failed send is logged, as the client retries.
func serveUDP(ctx context.Context, log klog.Logger, conn net.PacketConn, what string, handle func(b []byte, peer net.Addr) (*outgoing, error)) error {
	buf := make([]byte, 1<<16)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		a, err := handle(buf[:n], peer)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if a == nil {
			continue
		}
		if _, err := conn.WriteTo(a.data, a.to); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error(err, "sending an answer", append([]any{"to", a.to}, a.log...)...)
			continue
		}
		log.V(2).Info("answered", append([]any{"to", a.to}, a.log...)...)
	}
}

// replyAddr is where an answer to a message from peer goes: the client's
// port 68 at its address when it has one, else (and always for a NAK) the
// broadcast address.
func replyAddr(peer net.Addr, resp *dhcpv4.DHCPv4) *net.UDPAddr {
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	u, ok := peer.(*net.UDPAddr)
	if !ok || resp.MessageType() == dhcpv4.MessageTypeNak {
		return bcast
	}
	ip := u.IP.To4()
	if ip == nil || ip.IsUnspecified() || ip.Equal(net.IPv4bcast) {
		return bcast
	}
	return &net.UDPAddr{IP: ip, Port: dhcpv4.ClientPort}
}

// checkServerAddr checks that ip is assigned to the device ifname.
func checkServerAddr(ifname string, ip net.IP) error {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifname, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", ifname, err)
	}
	if !hasAddr(addrs, ip) {
		return fmt.Errorf("ServerIP %v is not assigned to %s (it has %v)", ip, ifname, addrs)
	}
	return nil
}

// hasAddr reports whether ip is one of addrs.
func hasAddr(addrs []net.Addr, ip net.IP) bool {
	for _, a := range addrs {
		var aip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			aip = a.IP
		case *net.IPAddr:
			aip = a.IP
		}
		if aip != nil && aip.Equal(ip) {
			return true
		}
	}
	return false
}
