package dhcp

//lint:file-ignore ST1005 Validate's errors begin with the name of the Lease6 field they are about.

import (
	"fmt"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// Lease6 is what the guest's one NIC on an interface gets over IPv6: an
// address by DHCPv6 (IA_NA, Serve6, run by the launcher), and router
// advertisements (Advertise, sent by the node agent) that make the pod the
// guest's default router and announce the on-link prefix.
//
// KubeVirt's launcher serves the same DHCPv6 address but sends no router
// advertisement, so its guests have no IPv6 default route unless cloud-init
// gives one (kubevirt#19193); a guest here gets it from the advertisement,
// as from any IPv6 router.
type Lease6 struct {
	// ServerInterface is the network device both servers run on, e.g.
	// "k6t-eth0". It needs an IPv6 link-local address: the advertisements
	// come from it.
	ServerInterface string
	// IP is the guest's address, e.g. fd10:0:2::2.
	IP net.IP
	// PrefixLen is the on-link prefix the advertisements announce around IP
	// (120 for KubeVirt's fd10:0:2::/120). It is not announced for
	// stateless autoconfiguration: the guest's one address is IP.
	PrefixLen int
	// DNS are the IPv6 name servers (DHCPv6 option 23 and the
	// advertisements' RDNSS option).
	DNS []net.IP
	// SearchDomains is the domain search list (option 24 and DNSSL).
	SearchDomains []string
	// MTU is announced in the advertisements; 0 leaves it out.
	MTU uint16
	// RouterLifetime is how long the guest keeps the pod as its default
	// router after an advertisement; 0 means
	// DefaultRouterLifetime.
	RouterLifetime time.Duration
}

// DefaultRouterLifetime is the router lifetime the advertisements carry when
// Lease6.RouterLifetime is 0: RFC 4861's default (3 × MaxRtrAdvInterval).
// Advertise sends one every RAInterval, well inside it.
const DefaultRouterLifetime = 30 * time.Minute

// RAInterval is how often Advertise sends an unsolicited router
// advertisement; it also answers each router solicitation at once.
const RAInterval = 3 * time.Minute

// maxRouterLifetime is the longest router lifetime RFC 4861 allows.
const maxRouterLifetime = 9000 * time.Second

// Validate reports the first field of l that Serve6 or Advertise cannot
// use, naming it.
func (l *Lease6) Validate() error {
	if l.ServerInterface == "" || len(l.ServerInterface) > maxIfNameLen {
		return fmt.Errorf("ServerInterface %q is not a network device name (1 to %d bytes)", l.ServerInterface, maxIfNameLen)
	}
	if l.IP.To16() == nil || l.IP.To4() != nil {
		return fmt.Errorf("IP %v is not an IPv6 address", l.IP)
	}
	if !l.IP.IsGlobalUnicast() {
		return fmt.Errorf("IP %v is not a global unicast address", l.IP)
	}
	if l.PrefixLen < 1 || l.PrefixLen > 127 {
		return fmt.Errorf("PrefixLen %d is outside 1..127", l.PrefixLen)
	}
	for i, ip := range l.DNS {
		if ip.To16() == nil || ip.To4() != nil {
			return fmt.Errorf("DNS[%d] %v is not an IPv6 address", i, ip)
		}
	}
	if l.MTU != 0 && l.MTU < 1280 {
		return fmt.Errorf("MTU %d is below IPv6's minimum of 1280", l.MTU)
	}
	if l.RouterLifetime < 0 || l.RouterLifetime > maxRouterLifetime {
		return fmt.Errorf("RouterLifetime %v is outside 0..%v", l.RouterLifetime, maxRouterLifetime)
	}
	return nil
}

// Prefix is the on-link prefix the advertisements announce.
func (l *Lease6) Prefix() *net.IPNet {
	mask := net.CIDRMask(l.PrefixLen, 128)
	return &net.IPNet{IP: l.IP.Mask(mask), Mask: mask}
}

func (l *Lease6) routerLifetime() time.Duration {
	if l.RouterLifetime == 0 {
		return DefaultRouterLifetime
	}
	return l.RouterLifetime
}

// Reply6 is the DHCPv6 server's answer to req for lease, from the server
// whose DUID is serverID: an Advertise for a Solicit (a Reply when the
// client asked for rapid commit), a Reply with the lease's address for a
// Request, Renew, Rebind or Confirm, a Reply without one for an
// Information-request, Release or Decline. It returns nil, and no error,
// for what a server does not answer (relayed messages, server messages, a
// Request meant for another server).
//
// Like KubeVirt's, the server hands its one address to any client: IPv6
// clients name themselves by a DUID, not by the NIC's MAC.
func Reply6(req dhcpv6.DHCPv6, lease *Lease6, serverID dhcpv6.DUID) (*dhcpv6.Message, error) {
	msg, ok := req.(*dhcpv6.Message)
	if !ok {
		return nil, nil
	}
	if sid := msg.Options.ServerID(); sid != nil && !sid.Equal(serverID) {
		switch msg.Type() {
		case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
			return nil, nil // RFC 8415 18.4: for another server
		}
	}
	if msg.Options.ClientID() == nil {
		return nil, nil
	}
	mods := []dhcpv6.Modifier{dhcpv6.WithServerID(serverID)}
	if len(lease.DNS) > 0 {
		mods = append(mods, dhcpv6.WithDNS(lease.DNS...))
	}
	if len(lease.SearchDomains) > 0 {
		mods = append(mods, dhcpv6.WithDomainSearchList(lease.SearchDomains...))
	}
	withAddr := append(mods, withIANA(msg, lease.IP))
	var resp *dhcpv6.Message
	var err error
	switch msg.Type() {
	case dhcpv6.MessageTypeSolicit:
		if msg.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
			resp, err = dhcpv6.NewReplyFromMessage(msg, withAddr...)
		} else {
			resp, err = dhcpv6.NewAdvertiseFromSolicit(msg, withAddr...)
		}
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeConfirm:
		resp, err = dhcpv6.NewReplyFromMessage(msg, withAddr...)
	case dhcpv6.MessageTypeInformationRequest, dhcpv6.MessageTypeRelease:
		resp, err = dhcpv6.NewReplyFromMessage(msg, mods...)
	case dhcpv6.MessageTypeDecline:
		// The guest found its address in use: acknowledged (RFC 8415
		// 18.3.8), with nothing else to offer.
		resp = &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: msg.TransactionID}
		resp.AddOption(dhcpv6.OptClientID(msg.Options.ClientID()))
		for _, m := range mods {
			m(resp)
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("building the answer to a DHCPv6 %s: %w", msg.Type(), err)
	}
	return resp, nil
}

// withIANA puts lease's address in an IA_NA with the IAID the client asked
// with (0 when it asked none), valid and preferred forever, with T1 and T2
// left to the client (0).
func withIANA(msg *dhcpv6.Message, ip net.IP) dhcpv6.Modifier {
	var iaid [4]byte
	if ia := msg.Options.OneIANA(); ia != nil {
		iaid = ia.IaId
	}
	addr := dhcpv6.OptIAAddress{IPv6Addr: ip, PreferredLifetime: infiniteLifetime, ValidLifetime: infiniteLifetime}
	return func(d dhcpv6.DHCPv6) {
		if m, ok := d.(*dhcpv6.Message); ok {
			m.UpdateOption(&dhcpv6.OptIANA{IaId: iaid, Options: dhcpv6.IdentityOptions{Options: []dhcpv6.Option{&addr}}})
		}
	}
}

// infiniteLifetime is DHCPv6's "forever" (0xffffffff seconds).
const infiniteLifetime = time.Duration(0xffffffff) * time.Second

// ServerDUID is the DUID the server names itself by: a DUID-LL of the MAC
// of the device it serves on, stable across launcher restarts.
func ServerDUID(mac net.HardwareAddr) dhcpv6.DUID {
	return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac}
}
