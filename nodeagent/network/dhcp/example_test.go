package dhcp_test

import (
	"fmt"
	"net"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// The masquerade binding's lease: the guest gets 10.0.2.2/24 behind the
// pod's NAT, the launcher's bridge 10.0.2.1 is its gateway and DHCP server,
// and the pod's DNS is passed on. Reply answers a guest's DISCOVER with an
// OFFER; Serve does the same on the wire.
func ExampleReply() {
	guest := net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	lease := dhcp.Lease{
		ServerInterface: "k6t-eth0",
		ServerIP:        net.IPv4(10, 0, 2, 1),
		ClientMAC:       guest,
		IP:              net.IPNet{IP: net.IPv4(10, 0, 2, 2), Mask: net.CIDRMask(24, 32)},
		Router:          net.IPv4(10, 0, 2, 1),
		DNS:             []net.IP{net.IPv4(10, 96, 0, 10)},
		SearchDomains:   []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Hostname:        "vm1",
		MTU:             1450,
	}
	discover, err := dhcpv4.NewDiscovery(guest)
	if err != nil {
		fmt.Println(err)
		return
	}
	offer, err := dhcp.Reply(discover, &lease)
	if err != nil {
		fmt.Println(err)
		return
	}
	mtu, _ := dhcpv4.GetUint16(dhcpv4.OptionInterfaceMTU, offer.Options)
	fmt.Println(offer.MessageType(), offer.YourIPAddr)
	fmt.Println("mask:", net.IP(offer.SubnetMask()))
	fmt.Println("router:", offer.Router())
	fmt.Println("dns:", offer.DNS())
	fmt.Println("search:", offer.DomainSearch().Labels)
	fmt.Println("hostname:", offer.HostName())
	fmt.Println("mtu:", mtu)
	fmt.Println("lease:", offer.IPAddressLeaseTime(0))
	fmt.Println("server:", offer.ServerIdentifier())
	// Output:
	// OFFER 10.0.2.2
	// mask: 255.255.255.0
	// router: [10.0.2.1]
	// dns: [10.96.0.10]
	// search: [default.svc.cluster.local svc.cluster.local cluster.local]
	// hostname: vm1
	// mtu: 1450
	// lease: 24h0m0s
	// server: 10.0.2.1
}
