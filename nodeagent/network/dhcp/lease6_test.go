package dhcp

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/mdlayher/ndp"
)

func testLease6() Lease6 {
	return Lease6{
		ServerInterface: "k6t-eth0", IP: net.ParseIP("fd10:0:2::2"), PrefixLen: 120,
		DNS: []net.IP{net.ParseIP("fd00:10:96::a")}, SearchDomains: []string{"cluster.local"}, MTU: 1400,
	}
}

var serverMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}

// request6 is a client message of type mt with an IA_NA of IAID iaid.
func request6(t *testing.T, mt dhcpv6.MessageType, iaid [4]byte, mods ...dhcpv6.Modifier) *dhcpv6.Message {
	t.Helper()
	m, err := dhcpv6.NewMessage()
	if err != nil {
		t.Fatal(err)
	}
	m.MessageType = mt
	m.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: guestMAC}))
	m.AddOption(&dhcpv6.OptIANA{IaId: iaid})
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func TestReply6(t *testing.T) {
	lease := testLease6()
	sid := ServerDUID(serverMAC)
	iaid := [4]byte{1, 2, 3, 4}
	for _, tc := range []struct {
		name     string
		req      *dhcpv6.Message
		wantType dhcpv6.MessageType // 0: no answer
		wantAddr bool
	}{
		{"solicit", request6(t, dhcpv6.MessageTypeSolicit, iaid), dhcpv6.MessageTypeAdvertise, true},
		{"solicit with rapid commit", request6(t, dhcpv6.MessageTypeSolicit, iaid, dhcpv6.WithRapidCommit), dhcpv6.MessageTypeReply, true},
		{"request", request6(t, dhcpv6.MessageTypeRequest, iaid, dhcpv6.WithServerID(sid)), dhcpv6.MessageTypeReply, true},
		{"renew", request6(t, dhcpv6.MessageTypeRenew, iaid, dhcpv6.WithServerID(sid)), dhcpv6.MessageTypeReply, true},
		{"rebind", request6(t, dhcpv6.MessageTypeRebind, iaid), dhcpv6.MessageTypeReply, true},
		{"information request", request6(t, dhcpv6.MessageTypeInformationRequest, iaid), dhcpv6.MessageTypeReply, false},
		{"release", request6(t, dhcpv6.MessageTypeRelease, iaid, dhcpv6.WithServerID(sid)), dhcpv6.MessageTypeReply, false},
		{"decline", request6(t, dhcpv6.MessageTypeDecline, iaid, dhcpv6.WithServerID(sid)), dhcpv6.MessageTypeReply, false},
		{"request for another server", request6(t, dhcpv6.MessageTypeRequest, iaid, dhcpv6.WithServerID(ServerDUID(guestMAC))), 0, false},
		{"an advertise (a server's message)", request6(t, dhcpv6.MessageTypeAdvertise, iaid), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Reply6(tc.req, &lease, sid)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantType == 0 {
				if resp != nil {
					t.Fatalf("answered %v, want no answer", resp.Type())
				}
				return
			}
			if resp == nil || resp.Type() != tc.wantType {
				t.Fatalf("answer %v, want a %v", resp, tc.wantType)
			}
			if resp.TransactionID != tc.req.TransactionID || !resp.Options.ServerID().Equal(sid) || resp.Options.ClientID() == nil {
				t.Errorf("answer %v: want the request's transaction ID, the server's DUID and the client's", resp.Summary())
			}
			if got := resp.Options.DNS(); len(got) != 1 || !got[0].Equal(lease.DNS[0]) {
				t.Errorf("name servers %v, want %v", got, lease.DNS)
			}
			ia := resp.Options.OneIANA()
			if !tc.wantAddr {
				if ia != nil {
					t.Errorf("answer carries an IA_NA: %v", ia)
				}
				return
			}
			if ia == nil || ia.IaId != iaid {
				t.Fatalf("IA_NA %v, want one with the client's IAID %v", ia, iaid)
			}
			addr := ia.Options.OneAddress()
			if addr == nil || !addr.IPv6Addr.Equal(lease.IP) || addr.ValidLifetime != infiniteLifetime {
				t.Errorf("IA_NA address %v, want %v valid forever", addr, lease.IP)
			}
		})
	}
}

func TestLease6Validate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Lease6)
	}{
		{"ServerInterface", func(l *Lease6) { l.ServerInterface = "" }},
		{"IP", func(l *Lease6) { l.IP = net.ParseIP("10.0.2.2") }},
		{"IP", func(l *Lease6) { l.IP = net.ParseIP("fe80::2") }},
		{"PrefixLen", func(l *Lease6) { l.PrefixLen = 128 }},
		{"DNS[0]", func(l *Lease6) { l.DNS = []net.IP{net.ParseIP("10.0.0.10")} }},
		{"MTU", func(l *Lease6) { l.MTU = 1000 }},
	} {
		l := testLease6()
		tc.edit(&l)
		if err := l.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.field+" ") {
			t.Errorf("%s: Validate() = %v, want an error about %s", tc.field, err, tc.field)
		}
	}
	l := testLease6()
	if err := l.Validate(); err != nil {
		t.Errorf("a valid lease: %v", err)
	}
}

func TestRouterAdvertisement(t *testing.T) {
	l := testLease6()
	ra := RouterAdvertisement(&l, serverMAC)
	if !ra.ManagedConfiguration || !ra.OtherConfiguration || ra.RouterLifetime != DefaultRouterLifetime {
		t.Errorf("flags M=%v O=%v, router lifetime %v; want M, O and %v", ra.ManagedConfiguration, ra.OtherConfiguration, ra.RouterLifetime, DefaultRouterLifetime)
	}
	var prefix *ndp.PrefixInformation
	var mtu *ndp.MTU
	var rdnss *ndp.RecursiveDNSServer
	for _, o := range ra.Options {
		switch o := o.(type) {
		case *ndp.PrefixInformation:
			prefix = o
		case *ndp.MTU:
			mtu = o
		case *ndp.RecursiveDNSServer:
			rdnss = o
		}
	}
	if prefix == nil || prefix.Prefix != netip.MustParseAddr("fd10:0:2::") || prefix.PrefixLength != 120 || !prefix.OnLink || prefix.AutonomousAddressConfiguration {
		t.Errorf("prefix %+v, want fd10:0:2::/120 on-link and not autonomous", prefix)
	}
	if mtu == nil || mtu.MTU != 1400 {
		t.Errorf("MTU option %v, want 1400", mtu)
	}
	if rdnss == nil || len(rdnss.Servers) != 1 || rdnss.Servers[0] != netip.MustParseAddr("fd00:10:96::a") {
		t.Errorf("RDNSS %+v, want fd00:10:96::a", rdnss)
	}
	if _, err := ndp.MarshalMessage(ra); err != nil {
		t.Errorf("the advertisement does not encode: %v", err)
	}
}
