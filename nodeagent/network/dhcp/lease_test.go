package dhcp

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	cidr := func(s string) net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		return net.IPNet{IP: ip, Mask: n.Mask}
	}
	network := func(s string) net.IPNet {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		return *n
	}
	tests := []struct {
		name string
		edit func(l *Lease)
		want string // "" for valid
	}{
		{"every field set", func(l *Lease) {}, ""},
		{"optional fields unset", func(l *Lease) {
			l.ClientMAC, l.Router, l.DNS, l.SearchDomains, l.Hostname, l.MTU, l.Routes = nil, nil, nil, nil, "", 0, nil
		}, ""},
		{"bridge binding: /32 pod address, router through an on-link route, link-local server", func(l *Lease) {
			l.ServerIP = net.IPv4(169, 254, 75, 10)
			l.IP = cidr("10.244.1.17/32")
			l.Router = net.IPv4(169, 254, 1, 1)
			l.Routes = []Route{{Dest: network("169.254.1.1/32")}}
		}, ""},
		{"/31 point-to-point address", func(l *Lease) { l.IP = cidr("10.0.2.0/31"); l.Router = net.IPv4(10, 0, 2, 1); l.Routes = nil }, ""},
		{"infinite lease", func(l *Lease) { l.LeaseTime = 1<<32*time.Second - time.Second }, ""},
		{"16-byte IPv4 addresses", func(l *Lease) { l.IP.IP = net.ParseIP("10.0.2.2") }, ""},

		{"no interface", func(l *Lease) { l.ServerInterface = "" }, "dhcp lease: ServerInterface is empty"},
		{"interface name too long", func(l *Lease) { l.ServerInterface = "k6t-eth0-much-too-long" },
			`dhcp lease: ServerInterface "k6t-eth0-much-too-long" is not a network device name`},
		{"interface name with a slash", func(l *Lease) { l.ServerInterface = "../eth0" },
			`dhcp lease: ServerInterface "../eth0" is not a network device name`},
		{"no server IP", func(l *Lease) { l.ServerIP = nil }, "dhcp lease: ServerIP <nil> is not a unicast IPv4 address"},
		{"IPv6 server IP", func(l *Lease) { l.ServerIP = net.ParseIP("fd10::1") }, "dhcp lease: ServerIP fd10::1 is not a unicast IPv4 address"},
		{"server IP is the guest's", func(l *Lease) { l.ServerIP = net.IPv4(10, 0, 2, 2) },
			"dhcp lease: IP 10.0.2.2/24: ServerIP 10.0.2.2 is the guest's own address"},
		{"no guest IP", func(l *Lease) { l.IP = net.IPNet{} }, "dhcp lease: IP <nil> is not a unicast IPv4 address"},
		{"guest IP 0.0.0.0", func(l *Lease) { l.IP.IP = net.IPv4zero }, "dhcp lease: IP 0.0.0.0 is not a unicast IPv4 address"},
		{"multicast guest IP", func(l *Lease) { l.IP.IP = net.IPv4(224, 0, 0, 1) }, "dhcp lease: IP 224.0.0.1 is not a unicast IPv4 address"},
		{"IPv6 guest IP", func(l *Lease) { l.IP = cidr("fd10::2/64") }, "dhcp lease: IP fd10::2 is not a unicast IPv4 address"},
		{"no mask", func(l *Lease) { l.IP.Mask = nil }, "dhcp lease: IP 10.0.2.2: mask <nil> is not an IPv4 prefix of 1 to 32 bits"},
		{"zero mask", func(l *Lease) { l.IP.Mask = net.CIDRMask(0, 32) }, "dhcp lease: IP 10.0.2.2: mask 00000000 is not an IPv4 prefix of 1 to 32 bits"},
		{"non-contiguous mask", func(l *Lease) { l.IP.Mask = net.IPv4Mask(255, 0, 255, 0) }, "dhcp lease: IP 10.0.2.2: mask ff00ff00 is not an IPv4 prefix of 1 to 32 bits"},
		{"IPv6 mask", func(l *Lease) { l.IP.Mask = net.CIDRMask(120, 128) }, "dhcp lease: IP 10.0.2.2: mask ffffffffffffffffffffffffffffff00 is not an IPv4 prefix of 1 to 32 bits"},
		{"network address", func(l *Lease) { l.IP.IP = net.IPv4(10, 0, 2, 0) }, "dhcp lease: IP 10.0.2.0/24: it is the subnet's network address"},
		{"broadcast address", func(l *Lease) { l.IP.IP = net.IPv4(10, 0, 2, 255) }, "dhcp lease: IP 10.0.2.255/24: it is the subnet's broadcast address"},
		{"router outside the subnet", func(l *Lease) { l.Router = net.IPv4(10, 1, 0, 1) },
			"dhcp lease: IP 10.0.2.2/24: Router 10.1.0.1 is outside the subnet, and no on-link route in Routes reaches it"},
		{"router behind a route with a gateway is not on-link", func(l *Lease) {
			l.Router = net.IPv4(10, 10, 0, 1) // Routes has 10.10.0.0/16 via 10.0.2.254
		}, "dhcp lease: IP 10.0.2.2/24: Router 10.10.0.1 is outside the subnet, and no on-link route in Routes reaches it"},
		{"router is the guest", func(l *Lease) { l.Router = net.IPv4(10, 0, 2, 2) }, "dhcp lease: IP 10.0.2.2/24: Router 10.0.2.2 is the guest's own address"},
		{"IPv6 router", func(l *Lease) { l.Router = net.ParseIP("fe80::1") }, "dhcp lease: Router fe80::1 is not a unicast IPv4 address"},
		{"IPv6 DNS server", func(l *Lease) { l.DNS = append(l.DNS, net.ParseIP("fd00::10")) }, "dhcp lease: DNS[2] fd00::10 is not a unicast IPv4 address"},
		{"nil DNS server", func(l *Lease) { l.DNS = []net.IP{nil} }, "dhcp lease: DNS[0] <nil> is not a unicast IPv4 address"},
		{"empty search domain", func(l *Lease) { l.SearchDomains = []string{"cluster.local", ""} }, `dhcp lease: SearchDomains[1] "": empty name`},
		{"search domain with an empty label", func(l *Lease) { l.SearchDomains = []string{"svc..local"} }, `dhcp lease: SearchDomains[0] "svc..local": empty label`},
		{"search domain is the root", func(l *Lease) { l.SearchDomains = []string{"."} }, `dhcp lease: SearchDomains[0] ".": empty name`},
		{"search domain with a space", func(l *Lease) { l.SearchDomains = []string{"a b"} }, `dhcp lease: SearchDomains[0] "a b": label "a b" has character ' '`},
		{"search domain label too long", func(l *Lease) { l.SearchDomains = []string{strings.Repeat("a", 64) + ".local"} },
			`dhcp lease: SearchDomains[0] "` + strings.Repeat("a", 64) + `.local": label "aaaaaaaaaa"... is longer than 63 characters`},
		{"search domain too long", func(l *Lease) { l.SearchDomains = []string{strings.Repeat("abcdefg.", 32) + "x"} },
			`dhcp lease: SearchDomains[0] "` + strings.Repeat("abcdefg.", 32) + `x": longer than 253 characters`},
		{"hostname with a NUL", func(l *Lease) { l.Hostname = "vm\x001" }, `dhcp lease: Hostname "vm\x001": label "vm\x001" has character '\x00'`},
		{"MTU below 68", func(l *Lease) { l.MTU = 67 }, "dhcp lease: MTU 67 is below 68, the smallest IPv4 allows"},
		{"negative lease time", func(l *Lease) { l.LeaseTime = -time.Hour }, "dhcp lease: LeaseTime -1h0m0s is not between 1s and 2^32-1s (0 means 24h0m0s)"},
		{"sub-second lease time", func(l *Lease) { l.LeaseTime = time.Millisecond }, "dhcp lease: LeaseTime 1ms is not between 1s and 2^32-1s (0 means 24h0m0s)"},
		{"lease time beyond infinite", func(l *Lease) { l.LeaseTime = 1 << 32 * time.Second },
			"dhcp lease: LeaseTime 1193046h28m16s is not between 1s and 2^32-1s (0 means 24h0m0s)"},
		{"route destination with host bits", func(l *Lease) { l.Routes = []Route{{Dest: cidr("10.10.1.0/16")}} },
			"dhcp lease: Routes[0]: destination 10.10.1.0/16 has host bits set (want 10.10.0.0/16)"},
		{"IPv6 route", func(l *Lease) { l.Routes = append(l.Routes, Route{Dest: network("fd00::/8")}) },
			"dhcp lease: Routes[1]: destination fd00:: is not an IPv4 network"},
		{"route without a mask", func(l *Lease) { l.Routes = []Route{{Dest: net.IPNet{IP: net.IPv4(10, 10, 0, 0)}}} },
			"dhcp lease: Routes[0]: destination 10.10.0.0: mask <nil> is not an IPv4 prefix"},
		{"IPv6 route gateway", func(l *Lease) { l.Routes = []Route{{Dest: network("10.10.0.0/16"), Gateway: net.ParseIP("fe80::1")}} },
			"dhcp lease: Routes[0]: destination 10.10.0.0/16: Gateway fe80::1 is not an IPv4 address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := testLease()
			tt.edit(&l)
			err := l.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Errorf("Validate: nil, want %q", tt.want)
			case tt.want != "" && err.Error() != tt.want:
				t.Errorf("Validate:\n got %q\nwant %q", err, tt.want)
			}
		})
	}
}
