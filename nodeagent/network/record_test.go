package network

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

func cidr(t testing.TB, s string) net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	if ip.To4() != nil {
		ip = ip.To4()
	}
	return net.IPNet{IP: ip, Mask: n.Mask}
}

func TestRecordRoundTrip(t *testing.T) {
	mac, _ := net.ParseMAC("0a:58:0a:f4:07:05")
	tests := []struct {
		name string
		rec  podRecord
		text string
	}{{
		name: "address only",
		rec:  podRecord{IP: cidr(t, "10.244.7.5/24"), MAC: mac},
		text: "vmkit-pod: ip=10.244.7.5/24 mac=0a:58:0a:f4:07:05",
	}, {
		name: "a layer-2 secondary network: the MAC only",
		rec:  podRecord{MAC: mac},
		text: "vmkit-pod: mac=0a:58:0a:f4:07:05",
	}, {
		name: "Calico-like: /32, on-link gateway",
		rec: podRecord{IP: cidr(t, "192.168.1.9/32"), MAC: mac, Gateway: net.IPv4(169, 254, 1, 1).To4(),
			Routes: []dhcp.Route{{Dest: cidr(t, "169.254.1.1/32")}, {Dest: cidr(t, "10.96.0.0/12"), Gateway: net.IPv4(169, 254, 1, 1).To4()}}},
		text: "vmkit-pod: ip=192.168.1.9/32 mac=0a:58:0a:f4:07:05 gw=169.254.1.1 routes=169.254.1.1/32,10.96.0.0/12>169.254.1.1",
	}, {
		name: "dual stack",
		rec: podRecord{IP: cidr(t, "10.244.0.5/24"), MAC: mac, Gateway: net.IPv4(10, 244, 0, 1).To4(),
			IP6: cidr(t, "fd00:10:244::5/64"), Gateway6: net.ParseIP("fd00:10:244::1")},
		text: "vmkit-pod: ip=10.244.0.5/24 mac=0a:58:0a:f4:07:05 gw=10.244.0.1 ip6=fd00:10:244::5/64 gw6=fd00:10:244::1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rec.String(); got != tt.text {
				t.Errorf("String = %q, want %q", got, tt.text)
			}
			got, err := parseRecord(tt.text)
			if err != nil {
				t.Fatalf("parseRecord: %v", err)
			}
			if diff := cmp.Diff(tt.rec, got); diff != "" {
				t.Errorf("parseRecord (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRecordErrors(t *testing.T) {
	for _, s := range []string{
		"",
		"some admin's alias",
		"vmkit-pod: ip=10.244.7.5/24",
		"vmkit-pod: ip=fd00::5/64 mac=0a:58:0a:f4:07:05",
		"vmkit-pod: ip=10.244.7.5/24 mac=0a:58:0a:f4:07:05 gw=x",
		"vmkit-pod: ip=10.244.7.5/24 mac=0a:58:0a:f4:07:05 routes=10.0.0.0/8>",
		"vmkit-pod: ip=10.244.7.5/24 mac=0a:58:0a:f4:07:05 color=blue",
	} {
		if rec, err := parseRecord(s); err == nil {
			t.Errorf("parseRecord(%q) = %+v, want an error", s, rec)
		}
	}
}

// FuzzParseRecord: whatever parses survives a round trip.
func FuzzParseRecord(f *testing.F) {
	f.Add("vmkit-pod: ip=192.168.1.9/32 mac=0a:58:0a:f4:07:05 gw=169.254.1.1 routes=169.254.1.1/32,10.96.0.0/12>169.254.1.1")
	f.Add("vmkit-pod: ip=10.244.7.5/24 mac=0a:58:0a:f4:07:05")
	f.Fuzz(func(t *testing.T, s string) {
		rec, err := parseRecord(s)
		if err != nil {
			return
		}
		again, err := parseRecord(rec.String())
		if err != nil {
			t.Fatalf("parseRecord(%q) after parseRecord(%q): %v", rec.String(), s, err)
		}
		if diff := cmp.Diff(rec, again); diff != "" {
			t.Errorf("round trip of %q (-first +second):\n%s", s, diff)
		}
	})
}

func TestSplitRoutes(t *testing.T) {
	addr := cidr(t, "10.244.7.5/24")
	sub, other, onlink, dflt := cidr(t, "10.244.7.0/24"), cidr(t, "10.96.0.0/12"), cidr(t, "169.254.1.1/32"), cidr(t, "0.0.0.0/0")
	routes := []netlink.Route{
		{Dst: &sub, Protocol: unix.RTPROT_KERNEL, Type: unix.RTN_UNICAST},
		{Dst: &dflt, Gw: net.IPv4(10, 244, 7, 1), Type: unix.RTN_UNICAST},
		{Dst: &other, Gw: net.IPv4(10, 244, 7, 254), Type: unix.RTN_UNICAST},
		{Dst: &onlink, Type: unix.RTN_UNICAST},
		{Dst: &other, Type: unix.RTN_BLACKHOLE},
	}
	gw, rest := splitRoutes(routes, addr)
	if !gw.Equal(net.IPv4(10, 244, 7, 1)) {
		t.Errorf("gateway = %v, want 10.244.7.1", gw)
	}
	want := []dhcp.Route{{Dest: other, Gateway: net.IPv4(10, 244, 7, 254).To4()}, {Dest: onlink}}
	if diff := cmp.Diff(want, rest); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}
