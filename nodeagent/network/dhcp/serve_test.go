package dhcp

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

func TestReplyAddr(t *testing.T) {
	bcast := "255.255.255.255:68"
	tests := []struct {
		name string
		peer net.Addr
		typ  dhcpv4.MessageType
		want string
	}{
		{"client without an address: broadcast", &net.UDPAddr{IP: net.IPv4zero, Port: 68}, dhcpv4.MessageTypeOffer, bcast},
		{"client without an IP in the peer: broadcast", &net.UDPAddr{Port: 68}, dhcpv4.MessageTypeAck, bcast},
		{"renewing client: unicast to its address", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: 68}, dhcpv4.MessageTypeAck, "10.0.2.2:68"},
		{"client sending from another port: its port 68", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: 10068}, dhcpv4.MessageTypeAck, "10.0.2.2:68"},
		{"NAK: broadcast even to a client with an address", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 77), Port: 68}, dhcpv4.MessageTypeNak, bcast},
		{"IPv6 peer: broadcast", &net.UDPAddr{IP: net.ParseIP("fe80::1"), Port: 68}, dhcpv4.MessageTypeAck, bcast},
		{"not UDP: broadcast", &net.IPAddr{IP: net.IPv4(10, 0, 2, 2)}, dhcpv4.MessageTypeAck, bcast},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := dhcpv4.New(dhcpv4.WithMessageType(tt.typ))
			if err != nil {
				t.Fatal(err)
			}
			if got := replyAddr(tt.peer, resp).String(); got != tt.want {
				t.Errorf("replyAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestHasAddr(t *testing.T) {
	addrs := []net.Addr{
		&net.IPNet{IP: net.IPv4(10, 0, 2, 1), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)},
		&net.IPAddr{IP: net.IPv4(169, 254, 75, 10).To4()},
	}
	tests := []struct {
		ip   net.IP
		want bool
	}{
		{net.IPv4(10, 0, 2, 1), true},
		{net.IPv4(10, 0, 2, 1).To4(), true},
		{net.IPv4(169, 254, 75, 10), true},
		{net.IPv4(10, 0, 2, 2), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := hasAddr(addrs, tt.ip); got != tt.want {
			t.Errorf("hasAddr(%v) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

// TestServeErrors checks what Serve refuses before it opens a socket.
func TestServeErrors(t *testing.T) {
	invalid := testLease()
	invalid.MTU = 10
	missing := testLease()
	missing.ServerInterface = "vmkit-nodev0"
	lo := testLease()
	lo.ServerInterface = "lo"
	tests := []struct {
		name  string
		lease Lease
		want  string // the error's start
	}{
		{"invalid lease", invalid, "dhcp serve: dhcp lease: MTU 10 is below 68"},
		{"no such interface", missing, "dhcp serve: interface vmkit-nodev0: "},
		{"server IP not on the interface", lo, "dhcp serve: ServerIP 10.0.2.1 is not assigned to lo (it has [127.0.0.1/8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Serve(context.Background(), tt.lease)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Serve: %v, want an error starting %q", err, tt.want)
			}
		})
	}
}
