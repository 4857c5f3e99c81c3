package dhcp

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

var (
	guestMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	otherMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc}
	testXID  = dhcpv4.TransactionID{0xde, 0xad, 0xbe, 0xef}
)

// testLease is a masquerade-style lease with every field set.
func testLease() Lease {
	return Lease{
		ServerInterface: "k6t-eth0",
		ServerIP:        net.IPv4(10, 0, 2, 1),
		ClientMAC:       guestMAC,
		IP:              net.IPNet{IP: net.IPv4(10, 0, 2, 2), Mask: net.CIDRMask(24, 32)},
		Router:          net.IPv4(10, 0, 2, 1),
		DNS:             []net.IP{net.IPv4(10, 96, 0, 10), net.IPv4(10, 96, 0, 11)},
		SearchDomains:   []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local."},
		Hostname:        "vm1",
		MTU:             1450,
		Routes:          []Route{{Dest: net.IPNet{IP: net.IPv4(10, 10, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}, Gateway: net.IPv4(10, 0, 2, 254)}},
	}
}

// answer is what a client reads from a reply, decoded from its wire bytes.
type answer struct {
	Type                    string
	XID                     dhcpv4.TransactionID
	Flags                   uint16
	CHAddr                  string
	CIAddr, YIAddr, GIAddr  string
	Codes                   []uint8 // options present, sorted
	ServerID, Mask, Bcast   string
	Router, DNS, Routes     []string
	Hostname, Message       string
	MTU                     uint16
	Search                  []string
	Lease, Renew, Rebind    time.Duration
	ClientID, RelayAgentOpt []byte
}

// decode round-trips resp through its wire encoding and reads it back with
// the library's decoders, as a client would.
func decode(t *testing.T, resp *dhcpv4.DHCPv4) *answer {
	t.Helper()
	if resp == nil {
		return nil
	}
	m, err := dhcpv4.FromBytes(resp.ToBytes())
	if err != nil {
		t.Fatalf("the reply does not decode: %v\n%s", err, resp.Summary())
	}
	if m.OpCode != dhcpv4.OpcodeBootReply {
		t.Errorf("opcode %v, want BootReply", m.OpCode)
	}
	a := &answer{
		Type:          m.MessageType().String(),
		XID:           m.TransactionID,
		Flags:         m.Flags,
		CHAddr:        m.ClientHWAddr.String(),
		CIAddr:        m.ClientIPAddr.String(),
		YIAddr:        m.YourIPAddr.String(),
		GIAddr:        m.GatewayIPAddr.String(),
		Hostname:      m.HostName(),
		Message:       m.Message(),
		Lease:         m.IPAddressLeaseTime(0),
		Renew:         m.IPAddressRenewalTime(0),
		Rebind:        m.IPAddressRebindingTime(0),
		ClientID:      m.Options.Get(dhcpv4.OptionClientIdentifier),
		RelayAgentOpt: m.Options.Get(dhcpv4.OptionRelayAgentInformation),
	}
	for code := range m.Options {
		a.Codes = append(a.Codes, code)
	}
	slices.Sort(a.Codes)
	if ip := m.ServerIdentifier(); ip != nil {
		a.ServerID = ip.String()
	}
	if mask := m.SubnetMask(); mask != nil {
		a.Mask = net.IP(mask).String()
	}
	if ip := m.BroadcastAddress(); ip != nil {
		a.Bcast = ip.String()
	}
	for _, ip := range m.Router() {
		a.Router = append(a.Router, ip.String())
	}
	for _, ip := range m.DNS() {
		a.DNS = append(a.DNS, ip.String())
	}
	for _, r := range m.ClasslessStaticRoute() {
		a.Routes = append(a.Routes, r.Dest.String()+" via "+r.Router.String())
	}
	if mtu, err := dhcpv4.GetUint16(dhcpv4.OptionInterfaceMTU, m.Options); err == nil {
		a.MTU = mtu
	}
	if l := m.DomainSearch(); l != nil {
		a.Search = l.Labels
	}
	return a
}

// request builds a client message with the test transaction ID.
func request(t *testing.T, typ dhcpv4.MessageType, mac net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{
		dhcpv4.WithTransactionID(testXID), dhcpv4.WithHwAddr(mac), dhcpv4.WithMessageType(typ),
	}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fullOffer is the OFFER of testLease to guestMAC.
func fullOffer() *answer {
	return &answer{
		Type: "OFFER", XID: testXID, CHAddr: guestMAC.String(),
		CIAddr: "0.0.0.0", YIAddr: "10.0.2.2", GIAddr: "0.0.0.0",
		Codes:    []uint8{1, 3, 6, 12, 26, 28, 51, 53, 54, 58, 59, 119, 121},
		ServerID: "10.0.2.1", Mask: "255.255.255.0", Bcast: "10.0.2.255",
		Router:   []string{"10.0.2.1"},
		DNS:      []string{"10.96.0.10", "10.96.0.11"},
		Routes:   []string{"10.10.0.0/16 via 10.0.2.254", "0.0.0.0/0 via 10.0.2.1"},
		Hostname: "vm1", MTU: 1450,
		Search: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Lease:  24 * time.Hour, Renew: 12 * time.Hour, Rebind: 21 * time.Hour,
	}
}

func TestReply(t *testing.T) {
	ack := func(edit func(a *answer)) *answer {
		a := fullOffer()
		a.Type = "ACK"
		if edit != nil {
			edit(a)
		}
		return a
	}
	serverID := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 2, 1)))
	want := func(ip net.IP) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip)) }
	nak := func(msg string) *answer {
		return &answer{
			Type: "NAK", XID: testXID, CHAddr: guestMAC.String(),
			CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", GIAddr: "0.0.0.0",
			Codes: []uint8{53, 54, 56}, ServerID: "10.0.2.1", Message: msg,
		}
	}
	anyClient := testLease()
	anyClient.ClientMAC = nil
	minimal := Lease{
		ServerInterface: "k6t-eth0", ServerIP: net.IPv4(169, 254, 75, 10),
		IP: net.IPNet{IP: net.IPv4(192, 168, 7, 9), Mask: net.CIDRMask(32, 32)}, LeaseTime: time.Hour,
	}
	ownDefault := testLease()
	ownDefault.Routes = append(ownDefault.Routes, Route{Dest: net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gateway: net.IPv4(10, 0, 2, 254)})
	onLink := testLease()
	onLink.Router = nil
	onLink.Routes = []Route{{Dest: net.IPNet{IP: net.IPv4(169, 254, 1, 1).To4(), Mask: net.CIDRMask(32, 32)}}}

	tests := []struct {
		name  string
		lease Lease
		req   *dhcpv4.DHCPv4
		want  *answer
	}{{
		name:  "DISCOVER gets an OFFER with every option",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC),
		want:  fullOffer(),
	}, {
		name:  "options the client did not ask for are sent too",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC, dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask)),
		want:  fullOffer(),
	}, {
		name:  "REQUEST selecting this server's offer gets an ACK",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC, serverID, want(net.IPv4(10, 0, 2, 2))),
		want:  ack(nil),
	}, {
		name:  "REQUEST after a reboot (no server identifier) gets an ACK",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC, want(net.IPv4(10, 0, 2, 2))),
		want:  ack(nil),
	}, {
		name:  "REQUEST renewing from ciaddr gets an ACK echoing ciaddr",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC, dhcpv4.WithClientIP(net.IPv4(10, 0, 2, 2))),
		want:  ack(func(a *answer) { a.CIAddr = "10.0.2.2" }),
	}, {
		name:  "REQUEST for another address gets a NAK",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC, serverID, want(net.IPv4(10, 0, 2, 77))),
		want:  nak("requested address 10.0.2.77, the lease is for 10.0.2.2"),
	}, {
		name:  "REQUEST renewing another address gets a NAK",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC, dhcpv4.WithClientIP(net.IPv4(192, 168, 1, 5))),
		want:  nak("requested address 192.168.1.5, the lease is for 10.0.2.2"),
	}, {
		name:  "REQUEST for no address gets a NAK",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC),
		want:  nak("requested no address, the lease is for 10.0.2.2"),
	}, {
		name:  "REQUEST for another server's offer is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, guestMAC, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 2, 99))), want(net.IPv4(10, 0, 2, 2))),
	}, {
		name:  "another client's DISCOVER is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeDiscover, otherMAC),
	}, {
		name:  "another client's REQUEST is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRequest, otherMAC, serverID, want(net.IPv4(10, 0, 2, 2))),
	}, {
		name:  "without ClientMAC any client gets the OFFER",
		lease: anyClient,
		req:   request(t, dhcpv4.MessageTypeDiscover, otherMAC),
		want:  func() *answer { a := fullOffer(); a.CHAddr = otherMAC.String(); return a }(),
	}, {
		name:  "INFORM gets an ACK without an address or lease times",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeInform, guestMAC, dhcpv4.WithClientIP(net.IPv4(10, 0, 2, 2))),
		want: ack(func(a *answer) {
			a.CIAddr, a.YIAddr = "10.0.2.2", "0.0.0.0"
			a.Codes = []uint8{1, 3, 6, 12, 26, 28, 53, 54, 119, 121}
			a.Lease, a.Renew, a.Rebind = 0, 0, 0
		}),
	}, {
		name:  "RELEASE is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeRelease, guestMAC, dhcpv4.WithClientIP(net.IPv4(10, 0, 2, 2)), serverID),
	}, {
		name:  "DECLINE is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeDecline, guestMAC, serverID, want(net.IPv4(10, 0, 2, 2))),
	}, {
		name:  "another server's OFFER is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeOffer, guestMAC, func(d *dhcpv4.DHCPv4) { d.OpCode = dhcpv4.OpcodeBootReply }),
	}, {
		name:  "a DISCOVER sent as a BOOTREPLY is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC, func(d *dhcpv4.DHCPv4) { d.OpCode = dhcpv4.OpcodeBootReply }),
	}, {
		name:  "BOOTP (no message type) is ignored",
		lease: testLease(),
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC, dhcpv4.WithoutOption(dhcpv4.OptionDHCPMessageType)),
	}, {
		name:  "flags, giaddr, client identifier and relay agent information are echoed",
		lease: testLease(),
		req: request(t, dhcpv4.MessageTypeDiscover, guestMAC, dhcpv4.WithBroadcast(true), dhcpv4.WithGatewayIP(net.IPv4(10, 9, 9, 9)),
			dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte{1, 0x52, 0x54, 0, 0x12, 0x34, 0x56})),
			dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, []byte{1, 2, 'a', 'b'}))),
		want: func() *answer {
			a := fullOffer()
			a.Flags, a.GIAddr = 0x8000, "10.9.9.9"
			a.Codes = []uint8{1, 3, 6, 12, 26, 28, 51, 53, 54, 58, 59, 61, 82, 119, 121}
			a.ClientID, a.RelayAgentOpt = []byte{1, 0x52, 0x54, 0, 0x12, 0x34, 0x56}, []byte{1, 2, 'a', 'b'}
			return a
		}(),
	}, {
		name:  "a minimal /32 lease sends no broadcast address and no unset option",
		lease: minimal,
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC),
		want: &answer{
			Type: "OFFER", XID: testXID, CHAddr: guestMAC.String(),
			CIAddr: "0.0.0.0", YIAddr: "192.168.7.9", GIAddr: "0.0.0.0",
			Codes:    []uint8{1, 51, 53, 54, 58, 59},
			ServerID: "169.254.75.10", Mask: "255.255.255.255",
			Lease: time.Hour, Renew: 30 * time.Minute, Rebind: 52*time.Minute + 30*time.Second,
		},
	}, {
		name:  "routes with their own default route get no second one",
		lease: ownDefault,
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC),
		want: func() *answer {
			a := fullOffer()
			a.Routes = []string{"10.10.0.0/16 via 10.0.2.254", "0.0.0.0/0 via 10.0.2.254"}
			return a
		}(),
	}, {
		name:  "without a router, routes get no default route; an unset gateway is on-link",
		lease: onLink,
		req:   request(t, dhcpv4.MessageTypeDiscover, guestMAC),
		want: func() *answer {
			a := fullOffer()
			a.Codes = []uint8{1, 6, 12, 26, 28, 51, 53, 54, 58, 59, 119, 121}
			a.Router, a.Routes = nil, []string{"169.254.1.1/32 via 0.0.0.0"}
			return a
		}(),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Reply(tt.req, &tt.lease)
			if err != nil {
				t.Fatalf("Reply: %v", err)
			}
			if diff := cmp.Diff(tt.want, decode(t, resp)); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplyErrors(t *testing.T) {
	lease := testLease()
	bad := testLease()
	bad.Router = net.IPv4(10, 1, 0, 1)
	tests := []struct {
		name  string
		req   *dhcpv4.DHCPv4
		lease *Lease
		want  string
	}{
		{"nil request", nil, &lease, "dhcp reply: nil request"},
		{"nil lease", request(t, dhcpv4.MessageTypeDiscover, guestMAC), nil, "dhcp reply: nil lease"},
		{"invalid lease", request(t, dhcpv4.MessageTypeDiscover, guestMAC), &bad,
			"dhcp reply to 52:54:00:12:34:56: dhcp lease: IP 10.0.2.2/24: Router 10.1.0.1 is outside the subnet, and no on-link route in Routes reaches it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Reply(tt.req, tt.lease)
			if resp != nil {
				t.Errorf("Reply returned a reply with an error: %v", resp)
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("Reply error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestSearchDomainsEncoding checks option 119's bytes against RFC 1035 and
// that the library's decoder reads the list back, including one longer than
// a single option's 255 bytes (sent split, RFC 3396).
func TestSearchDomainsEncoding(t *testing.T) {
	var long []string
	for i := 0; i < 12; i++ {
		long = append(long, strings.Repeat("x", 20)+".namespace.svc.cluster.local")
	}
	tests := []struct {
		name    string
		domains []string
		bytes   []byte // option 119's value; nil skips the check
		want    []string
	}{{
		name:    "one name",
		domains: []string{"cluster.local"},
		bytes:   []byte{7, 'c', 'l', 'u', 's', 't', 'e', 'r', 5, 'l', 'o', 'c', 'a', 'l', 0},
		want:    []string{"cluster.local"},
	}, {
		name:    "trailing dots are the root every name ends in",
		domains: []string{"a.b.", "c"},
		bytes:   []byte{1, 'a', 1, 'b', 0, 1, 'c', 0},
		want:    []string{"a.b", "c"},
	}, {
		name:    "Kubernetes' list",
		domains: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "example.com"},
		want:    []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "example.com"},
	}, {
		name:    "longer than one option",
		domains: long,
		want:    long,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lease := testLease()
			lease.SearchDomains = tt.domains
			resp, err := Reply(request(t, dhcpv4.MessageTypeDiscover, guestMAC), &lease)
			if err != nil {
				t.Fatal(err)
			}
			wire := resp.ToBytes()
			m, err := dhcpv4.FromBytes(wire)
			if err != nil {
				t.Fatal(err)
			}
			if tt.bytes != nil {
				if diff := cmp.Diff(tt.bytes, m.Options.Get(dhcpv4.OptionDNSDomainSearchList)); diff != "" {
					t.Errorf("option 119 bytes (-want +got):\n%s", diff)
				}
			}
			labels := m.DomainSearch()
			if labels == nil {
				t.Fatalf("the reply has no decodable option 119:\n%s", m.Summary())
			}
			if diff := cmp.Diff(tt.want, labels.Labels); diff != "" {
				t.Errorf("decoded search list (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplyDHCPOptions: a lease's boot file, TFTP server, NTP servers and
// private options (the VMI's dhcpOptions) are in the OFFER as RFC 2132
// encodes them.
func TestReplyDHCPOptions(t *testing.T) {
	lease := testLease()
	lease.BootFileName, lease.TFTPServerName = "pxelinux.0", "tftp.example"
	lease.NTPServers = []net.IP{net.IPv4(10, 0, 0, 1), net.IPv4(10, 0, 0, 2)}
	lease.PrivateOptions = []PrivateOption{{Code: 224, Value: []byte("site")}, {Code: 254, Value: []byte("x")}}
	if err := lease.Validate(); err != nil {
		t.Fatal(err)
	}
	resp, err := Reply(request(t, dhcpv4.MessageTypeDiscover, guestMAC), &lease)
	if err != nil || resp == nil {
		t.Fatalf("Reply: %v, %v", resp, err)
	}
	for code, want := range map[uint8]string{
		66: "tftp.example", 67: "pxelinux.0", 42: "\x0a\x00\x00\x01\x0a\x00\x00\x02", 224: "site", 254: "x",
	} {
		if got := resp.Options.Get(dhcpv4.GenericOptionCode(code)); string(got) != want {
			t.Errorf("option %d = %q, want %q", code, got, want)
		}
	}
	for _, bad := range []func(*Lease){
		func(l *Lease) { l.NTPServers = []net.IP{net.ParseIP("fd00::1")} },
		func(l *Lease) { l.PrivateOptions = []PrivateOption{{Code: 200}} },
		func(l *Lease) { l.PrivateOptions = []PrivateOption{{Code: 230}, {Code: 230}} },
		func(l *Lease) { l.BootFileName = strings.Repeat("x", 256) },
	} {
		l := testLease()
		bad(&l)
		if err := l.Validate(); err == nil {
			t.Errorf("lease %+v validated", l)
		}
	}
}
