package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
	"k8s.io/klog/v2"
)

// linkLocalPoll is how often Advertise looks for the interface's IPv6
// link-local address, the advertisements' source: the kernel assigns it
// once the device has a carrier, which a bridge gets when QEMU opens the
// guest's tap, after the node agent has wired the pod.
const linkLocalPoll = 200 * time.Millisecond

// Serve6 answers DHCPv6 for lease on lease.ServerInterface until ctx ends,
// then returns nil: a server on UDP port 547, joined to
// All_DHCP_Relay_Agents_and_Servers (ff02::1:2), that answers with Reply6.
// Like Serve, it runs in the network namespace of the calling thread and
// needs no privilege beyond binding port 547 (virt-launcher's pod allows
// it).
//
// A guest's DHCPv6 client asks only once a router advertisement with the
// Managed flag tells it to: Advertise sends those. It needs a raw ICMPv6
// socket (CAP_NET_RAW), which the launcher does not have, so the node
// agent runs it in the launcher pod's network namespace.
func Serve6(ctx context.Context, lease Lease6) error {
	if err := lease.Validate(); err != nil {
		return fmt.Errorf("dhcpv6 serve: %w", err)
	}
	iface, err := net.InterfaceByName(lease.ServerInterface)
	if err != nil {
		return fmt.Errorf("dhcpv6 serve: interface %s: %w", lease.ServerInterface, err)
	}
	log := klog.FromContext(ctx).WithValues("interface", lease.ServerInterface, "ip", lease.IP.String())
	conn, err := listenDHCPv6(iface)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	return serveDHCPv6(ctx, log, conn, iface, &lease)
}

// Advertise sends router advertisements for lease on lease.ServerInterface
// until ctx ends, then returns nil: from the interface's link-local address,
// every RAInterval and in answer to each router solicitation. It waits for
// that address, which the kernel assigns once the device has a carrier (a
// bridge gets one when QEMU opens the guest's tap).
//
// The advertisements set the Managed and Other flags (the address and name
// servers come from DHCPv6), announce lease.Prefix() as on-link and not for
// autoconfiguration, and carry the interface's MAC, lease.MTU, and the name
// servers and search domains as RDNSS and DNSSL options, so a guest that
// only listens to advertisements still resolves names. Their router
// lifetime makes the sender the guest's IPv6 default router.
//
// It runs in the network namespace of the calling thread, which must stay
// there (runtime.LockOSThread), and needs CAP_NET_RAW.
func Advertise(ctx context.Context, lease Lease6) error {
	if err := lease.Validate(); err != nil {
		return fmt.Errorf("router advertisements: %w", err)
	}
	iface, err := net.InterfaceByName(lease.ServerInterface)
	if err != nil {
		return fmt.Errorf("router advertisements: interface %s: %w", lease.ServerInterface, err)
	}
	conn, err := listenNDP(ctx, iface)
	if err != nil || conn == nil {
		return err
	}
	log := klog.FromContext(ctx).WithValues("interface", lease.ServerInterface, "ip", lease.IP.String())
	return advertise(ctx, log, conn, iface, &lease)
}

// listenDHCPv6 opens the DHCPv6 server's socket on iface: UDP port 547,
// bound to the device, joined to All_DHCP_Relay_Agents_and_Servers.
func listenDHCPv6(iface *net.Interface) (*net.UDPConn, error) {
	conn, err := server6.NewIPv6UDPConn(iface.Name, &net.UDPAddr{IP: net.IPv6unspecified, Port: dhcpv6.DefaultServerPort})
	if err != nil {
		return nil, fmt.Errorf("dhcpv6 serve on %s: %w", iface.Name, err)
	}
	group := &net.UDPAddr{IP: dhcpv6.AllDHCPRelayAgentsAndServers, Port: dhcpv6.DefaultServerPort}
	if err := ipv6.NewPacketConn(conn).JoinGroup(iface, group); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dhcpv6 serve on %s: joining %v: %w", iface.Name, group.IP, err)
	}
	return conn, nil
}

// serveDHCPv6 answers DHCPv6 on conn until ctx ends.
func serveDHCPv6(ctx context.Context, log klog.Logger, conn *net.UDPConn, iface *net.Interface, lease *Lease6) error {
	serverID := ServerDUID(iface.HardwareAddr)
	log.V(2).Info("DHCPv6 server listening")
	return serveUDP(ctx, log, conn, "dhcpv6 serve on "+iface.Name, func(b []byte, peer net.Addr) (*outgoing, error) {
		req, err := dhcpv6.FromBytes(b)
		if err != nil {
			log.V(4).Info("ignoring a message that is not DHCPv6", "from", peer, "err", err)
			return nil, nil
		}
		resp, err := Reply6(req, lease, serverID)
		if err != nil {
			log.Error(err, "answering DHCPv6", "from", peer)
			return nil, nil
		}
		if resp == nil {
			log.V(4).Info("not answering", "from", peer, "type", req.Type())
			return nil, nil
		}
		return &outgoing{data: resp.ToBytes(), to: peer, log: []any{"type", req.Type(), "answer", resp.Type()}}, nil
	})
}

// listenNDP opens the advertisements' socket on iface's link-local
// address once it has one, listening for router solicitations; nil, nil
// when ctx ends first.
func listenNDP(ctx context.Context, iface *net.Interface) (*ndp.Conn, error) {
	for {
		conn, _, err := ndp.Listen(iface, ndp.LinkLocal)
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("router advertisements on %s: opening a raw ICMPv6 socket (needs CAP_NET_RAW): %w", iface.Name, err)
		}
		if err == nil {
			var filter ipv6.ICMPFilter
			filter.SetAll(true)
			filter.Accept(ipv6.ICMPTypeRouterSolicitation)
			if err := conn.SetICMPFilter(&filter); err != nil {
				conn.Close()
				return nil, fmt.Errorf("router advertisements on %s: %w", iface.Name, err)
			}
			if err := conn.JoinGroup(netip.IPv6LinkLocalAllRouters()); err != nil {
				conn.Close()
				return nil, fmt.Errorf("router advertisements on %s: joining ff02::2: %w", iface.Name, err)
			}
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(linkLocalPoll):
		}
	}
}

// advertise sends router advertisements on conn until ctx ends.
func advertise(ctx context.Context, log klog.Logger, conn *ndp.Conn, iface *net.Interface, lease *Lease6) error {
	defer conn.Close()
	ra := RouterAdvertisement(lease, iface.HardwareAddr)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	solicited := make(chan struct{}, 1)
	readErr := make(chan error, 1)
	go func() {
		// The filter lets only solicitations through; their content
		// does not matter, every one is answered to all nodes.
		buf := make([]byte, 1500)
		for {
			if _, _, _, err := conn.ReadRaw(buf); err != nil {
				readErr <- err
				return
			}
			select {
			case solicited <- struct{}{}:
			default:
			}
		}
	}()
	log.V(2).Info("sending router advertisements")
	tick := time.NewTicker(RAInterval)
	defer tick.Stop()
	for {
		if err := conn.WriteTo(ra, nil, netip.IPv6LinkLocalAllNodes()); err != nil && ctx.Err() == nil {
			log.Error(err, "sending a router advertisement")
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("router advertisements on %s: %w", iface.Name, err)
		case <-solicited:
		case <-tick.C:
		}
	}
}

// RouterAdvertisement is the advertisement Serve6 sends for lease from a
// device with MAC mac.
func RouterAdvertisement(lease *Lease6, mac net.HardwareAddr) *ndp.RouterAdvertisement {
	prefix, _ := netip.AddrFromSlice(lease.Prefix().IP.To16())
	opts := []ndp.Option{
		&ndp.PrefixInformation{
			PrefixLength: uint8(lease.PrefixLen), OnLink: true,
			ValidLifetime: ndp.Infinity, PreferredLifetime: ndp.Infinity, Prefix: prefix,
		},
	}
	if len(mac) == 6 {
		opts = append(opts, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac})
	}
	if lease.MTU != 0 {
		opts = append(opts, ndp.NewMTU(uint32(lease.MTU)))
	}
	if len(lease.DNS) > 0 {
		servers := make([]netip.Addr, len(lease.DNS))
		for i, ip := range lease.DNS {
			servers[i], _ = netip.AddrFromSlice(ip.To16())
		}
		opts = append(opts, &ndp.RecursiveDNSServer{Lifetime: lease.routerLifetime(), Servers: servers})
	}
	if len(lease.SearchDomains) > 0 {
		opts = append(opts, &ndp.DNSSearchList{Lifetime: lease.routerLifetime(), DomainNames: lease.SearchDomains})
	}
	return &ndp.RouterAdvertisement{
		CurrentHopLimit:      64,
		ManagedConfiguration: true,
		OtherConfiguration:   true,
		RouterLifetime:       lease.routerLifetime(),
		Options:              opts,
	}
}
