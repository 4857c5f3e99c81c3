package dhcp

//lint:file-ignore ST1005 Validate's errors begin with the name of the Lease field they are about.

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"
)

// DefaultLeaseTime is the lease time offered when Lease.LeaseTime is 0. The
// address never changes while the launcher runs, so the lease is long: a
// guest renews after half of it (option 58) and keeps the address across a
// launcher restart without noticing. KubeVirt offers an effectively infinite
// lease; a day also bounds how long a guest keeps a stale address if its NIC
// moves to another network.
const DefaultLeaseTime = 24 * time.Hour

// maxLeaseTime is the longest lease option 51 can carry: 2^32-1 seconds,
// which RFC 2132 defines as infinity.
const maxLeaseTime = math.MaxUint32 * time.Second

// minMTU is the smallest MTU RFC 2132 (option 26) allows.
const minMTU = 68

// maxIfNameLen is the longest Linux network device name (IFNAMSIZ - 1).
const maxIfNameLen = 15

// Lease is what the server hands the one guest NIC on its interface.
type Lease struct {
	// ServerInterface is the network device the server listens on, e.g.
	// "k6t-eth0".
	ServerInterface string
	// ServerIP is the server identifier (option 54), the address a client
	// sends its renewals to; Serve requires it to be assigned to
	// ServerInterface. It need not be in IP's subnet (the bridge binding
	// uses a link-local one).
	ServerIP net.IP
	// ClientMAC is the only client answered; nil (or empty) answers any.
	ClientMAC net.HardwareAddr
	// IP is the guest's address and mask, e.g. 10.0.2.2/24.
	IP net.IPNet
	// Router is the default gateway (option 3); nil for none. It must be in
	// IP's subnet or reached by an on-link route in Routes.
	Router net.IP
	// DNS are the name servers (option 6), IPv4 only.
	DNS []net.IP
	// SearchDomains is the domain search list (option 119).
	SearchDomains []string
	// Hostname is the guest's host name (option 12); empty leaves it out.
	Hostname string
	// MTU is the interface MTU (option 26); 0 leaves it out.
	MTU uint16
	// Routes are classless static routes (option 121). A client that
	// accepts them ignores Router (RFC 3442), so Reply adds a default route
	// through Router to them unless they have one.
	Routes []Route
	// LeaseTime is the lease time (option 51); 0 means DefaultLeaseTime. It
	// is sent in whole seconds, at most 2^32-1 (infinite).
	LeaseTime time.Duration
	// BootFileName (option 67) and TFTPServerName (option 66) point a
	// network-booting guest at its boot file; empty leaves them out.
	BootFileName, TFTPServerName string
	// NTPServers are the time servers (option 42), IPv4 only.
	NTPServers []net.IP
	// PrivateOptions are site-specific options (224 to 254, RFC 2132),
	// sent as given.
	PrivateOptions []PrivateOption
}

// PrivateOption is one site-specific DHCP option.
type PrivateOption struct {
	// Code is 224 to 254.
	Code uint8
	// Value is the option's content, at most 255 bytes.
	Value []byte
}

// maxOptionLen is the most one DHCP option holds.
const maxOptionLen = 255

// Route is one classless static route (RFC 3442).
type Route struct {
	// Dest is the destination network; its host bits must be zero.
	Dest net.IPNet
	// Gateway is the next hop; nil or 0.0.0.0 means the destination is on
	// the link.
	Gateway net.IP
}

// Validate checks a lease and returns an error naming the bad field, e.g.
// "dhcp lease: IP 10.0.2.2/24: Router 10.1.0.1 is outside the subnet, and
// no on-link route in Routes reaches it".
func (l *Lease) Validate() error {
	if err := l.validate(); err != nil {
		return fmt.Errorf("dhcp lease: %w", err)
	}
	return nil
}

func (l *Lease) validate() error {
	if l.ServerInterface == "" {
		return errors.New("ServerInterface is empty")
	}
	if len(l.ServerInterface) > maxIfNameLen || strings.ContainsAny(l.ServerInterface, "/ \t\n\x00") {
		return fmt.Errorf("ServerInterface %q is not a network device name", l.ServerInterface)
	}
	if !isHostIPv4(l.ServerIP) {
		return fmt.Errorf("ServerIP %v is not a unicast IPv4 address", l.ServerIP)
	}
	if err := checkGuestIP(l.IP); err != nil {
		return err
	}
	if l.ServerIP.Equal(l.IP.IP) {
		return fmt.Errorf("IP %v: ServerIP %v is the guest's own address", &l.IP, l.ServerIP)
	}
	for i, r := range l.Routes {
		if err := checkRoute(r); err != nil {
			return fmt.Errorf("Routes[%d]: %w", i, err)
		}
	}
	if err := checkRouter(l.Router, l.IP, l.Routes); err != nil {
		return err
	}
	for i, ip := range l.DNS {
		if !isHostIPv4(ip) {
			return fmt.Errorf("DNS[%d] %v is not a unicast IPv4 address", i, ip)
		}
	}
	for i, d := range l.SearchDomains {
		if err := checkDomainName(d); err != nil {
			return fmt.Errorf("SearchDomains[%d] %q: %w", i, d, err)
		}
	}
	if l.Hostname != "" {
		if err := checkDomainName(l.Hostname); err != nil {
			return fmt.Errorf("Hostname %q: %w", l.Hostname, err)
		}
	}
	if l.MTU != 0 && l.MTU < minMTU {
		return fmt.Errorf("MTU %d is below %d, the smallest IPv4 allows", l.MTU, minMTU)
	}
	if len(l.BootFileName) > maxOptionLen || len(l.TFTPServerName) > maxOptionLen {
		return fmt.Errorf("BootFileName or TFTPServerName is longer than the %d bytes of a DHCP option", maxOptionLen)
	}
	for i, ip := range l.NTPServers {
		if !isHostIPv4(ip) {
			return fmt.Errorf("NTPServers[%d] %v is not a unicast IPv4 address", i, ip)
		}
	}
	seen := map[uint8]bool{}
	for i, o := range l.PrivateOptions {
		switch {
		case o.Code < 224 || o.Code > 254:
			return fmt.Errorf("PrivateOptions[%d]: option %d is not a private option (224 to 254)", i, o.Code)
		case seen[o.Code]:
			return fmt.Errorf("PrivateOptions[%d]: option %d is given twice", i, o.Code)
		case len(o.Value) > maxOptionLen:
			return fmt.Errorf("PrivateOptions[%d]: option %d is longer than %d bytes", i, o.Code, maxOptionLen)
		}
		seen[o.Code] = true
	}
	if l.LeaseTime < 0 || (l.LeaseTime > 0 && l.LeaseTime < time.Second) || l.LeaseTime > maxLeaseTime {
		return fmt.Errorf("LeaseTime %v is not between 1s and 2^32-1s (0 means %v)", l.LeaseTime, DefaultLeaseTime)
	}
	return nil
}

// checkGuestIP checks the guest's address: IPv4 with an IPv4 prefix of 1 to
// 32 bits, and neither the network nor the broadcast address of a subnet
// that has those.
func checkGuestIP(n net.IPNet) error {
	if !isHostIPv4(n.IP) {
		return fmt.Errorf("IP %v is not a unicast IPv4 address", n.IP)
	}
	ones, bits := n.Mask.Size()
	if bits != 8*net.IPv4len || ones == 0 {
		return fmt.Errorf("IP %v: mask %v is not an IPv4 prefix of 1 to 32 bits", n.IP, n.Mask)
	}
	if ones <= 30 {
		if n.IP.Equal(n.IP.Mask(n.Mask)) {
			return fmt.Errorf("IP %v: it is the subnet's network address", &n)
		}
		if n.IP.Equal(broadcastAddr(n)) {
			return fmt.Errorf("IP %v: it is the subnet's broadcast address", &n)
		}
	}
	return nil
}

// checkRouter checks that the guest can reach its default gateway: inside
// its subnet, or through an on-link route (how /32 pod addresses reach
// theirs).
func checkRouter(router net.IP, guest net.IPNet, routes []Route) error {
	if router == nil {
		return nil
	}
	if !isHostIPv4(router) {
		return fmt.Errorf("Router %v is not a unicast IPv4 address", router)
	}
	if router.Equal(guest.IP) {
		return fmt.Errorf("IP %v: Router %v is the guest's own address", &guest, router)
	}
	if guest.Contains(router) {
		return nil
	}
	for _, r := range routes {
		if isUnspecified(r.Gateway) && r.Dest.Contains(router) {
			return nil
		}
	}
	return fmt.Errorf("IP %v: Router %v is outside the subnet, and no on-link route in Routes reaches it", &guest, router)
}

// checkRoute checks one classless static route: an IPv4 destination without
// host bits and an IPv4 (or no) gateway.
func checkRoute(r Route) error {
	if r.Dest.IP.To4() == nil {
		return fmt.Errorf("destination %v is not an IPv4 network", r.Dest.IP)
	}
	if _, bits := r.Dest.Mask.Size(); bits != 8*net.IPv4len {
		return fmt.Errorf("destination %v: mask %v is not an IPv4 prefix", r.Dest.IP, r.Dest.Mask)
	}
	if canonical := r.Dest.IP.Mask(r.Dest.Mask); !canonical.Equal(r.Dest.IP) {
		return fmt.Errorf("destination %v has host bits set (want %v)", &r.Dest, &net.IPNet{IP: canonical, Mask: r.Dest.Mask})
	}
	if r.Gateway != nil && r.Gateway.To4() == nil {
		return fmt.Errorf("destination %v: Gateway %v is not an IPv4 address", &r.Dest, r.Gateway)
	}
	return nil
}

// checkDomainName checks a domain name or host name: labels of 1 to 63
// printable ASCII characters, 253 characters in all, one trailing dot
// allowed.
func checkDomainName(name string) error {
	n := strings.TrimSuffix(name, ".")
	if n == "" {
		return errors.New("empty name")
	}
	if len(n) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" {
			return errors.New("empty label")
		}
		if len(label) > 63 {
			return fmt.Errorf("label %.10q... is longer than 63 characters", label)
		}
		for _, c := range []byte(label) {
			if c <= ' ' || c > '~' {
				return fmt.Errorf("label %q has character %q", label, c)
			}
		}
	}
	return nil
}

// isHostIPv4 reports whether ip is an IPv4 address a host can have: not
// 0.0.0.0, 255.255.255.255 or multicast.
func isHostIPv4(ip net.IP) bool {
	ip4 := ip.To4()
	return ip4 != nil && !ip4.IsUnspecified() && !ip4.Equal(net.IPv4bcast) && !ip4.IsMulticast()
}

// isUnspecified reports whether a gateway means "on the link".
func isUnspecified(ip net.IP) bool {
	return ip == nil || ip.IsUnspecified()
}

// broadcastAddr is the broadcast address of n's subnet; n has passed
// checkGuestIP, so its mask has 4 bytes.
func broadcastAddr(n net.IPNet) net.IP {
	ip := n.IP.To4()
	b := make(net.IP, net.IPv4len)
	for i := range b {
		b[i] = ip[i] | ^n.Mask[i]
	}
	return b
}

// leaseTime is the lease time to offer.
func (l *Lease) leaseTime() time.Duration {
	if l.LeaseTime == 0 {
		return DefaultLeaseTime
	}
	return l.LeaseTime
}
