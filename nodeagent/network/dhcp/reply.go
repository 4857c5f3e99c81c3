package dhcp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

// Reply is the server's answer to req under lease, following RFC 2131:
//
//   - DISCOVER: an OFFER of the lease's address with every option set.
//   - REQUEST for the lease's address (option 50, or ciaddr when renewing):
//     an ACK with the same options. REQUEST for any other address, or for
//     none: a NAK carrying a message (option 56) that names both addresses.
//     A REQUEST naming another server's identifier (the client took another
//     server's offer) gets no answer.
//   - INFORM (a client with a static address asking for the rest): an ACK
//     without yiaddr and without lease times (RFC 2131 §4.3.5).
//   - RELEASE, DECLINE and everything else, any message whose client
//     hardware address is not Lease.ClientMAC (when set), and BOOTP replies
//     or messages without a DHCP message type: no answer, a nil reply and a
//     nil error. The address is the guest's alone, so there is nothing to
//     free or to mark as in use.
//
// Options are sent whether or not the client's parameter request list asks
// for them (RFC 2131 allows it): a guest that did not ask for the MTU still
// needs it on an overlay network. The Client Identifier (RFC 6842) and Relay
// Agent Information (RFC 3046) options are copied from req.
//
// The error is non-nil only for a nil req or lease or a lease that fails
// Validate.
func Reply(req *dhcpv4.DHCPv4, lease *Lease) (*dhcpv4.DHCPv4, error) {
	if req == nil {
		return nil, errors.New("dhcp reply: nil request")
	}
	if lease == nil {
		return nil, errors.New("dhcp reply: nil lease")
	}
	if err := lease.Validate(); err != nil {
		return nil, fmt.Errorf("dhcp reply to %v: %w", req.ClientHWAddr, err)
	}
	if req.OpCode != dhcpv4.OpcodeBootRequest || !forClient(req, lease) {
		return nil, nil
	}
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		return offer(req, lease, dhcpv4.MessageTypeOffer), nil
	case dhcpv4.MessageTypeRequest:
		return answerRequest(req, lease), nil
	case dhcpv4.MessageTypeInform:
		return inform(req, lease), nil
	default:
		return nil, nil
	}
}

// forClient reports whether the lease is for the client that sent req.
func forClient(req *dhcpv4.DHCPv4, lease *Lease) bool {
	return len(lease.ClientMAC) == 0 || bytes.Equal(req.ClientHWAddr, lease.ClientMAC)
}

// answerRequest answers a REQUEST: ACK for the lease's address, NAK for any
// other, nothing when the client chose another server.
func answerRequest(req *dhcpv4.DHCPv4, lease *Lease) *dhcpv4.DHCPv4 {
	if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(lease.ServerIP) {
		return nil
	}
	requested := requestedIP(req)
	if requested == nil || !requested.Equal(lease.IP.IP) {
		return nak(req, lease, requested)
	}
	ack := offer(req, lease, dhcpv4.MessageTypeAck)
	ack.ClientIPAddr = copyIPv4(req.ClientIPAddr)
	return ack
}

// requestedIP is the address a REQUEST asks for: option 50 when selecting
// an offer or rebooting, ciaddr when renewing or rebinding; nil for none.
func requestedIP(req *dhcpv4.DHCPv4) net.IP {
	if ip := req.RequestedIPAddress(); ip != nil {
		return ip
	}
	if ip := req.ClientIPAddr.To4(); ip != nil && !ip.IsUnspecified() {
		return ip
	}
	return nil
}

// offer is an OFFER or ACK of the lease: yiaddr and every option.
func offer(req *dhcpv4.DHCPv4, lease *Lease, typ dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	resp := newReply(req, typ, lease.ServerIP)
	resp.YourIPAddr = copyIPv4(lease.IP.IP)
	for _, o := range configOptions(lease) {
		resp.UpdateOption(o)
	}
	for _, o := range leaseTimeOptions(lease) {
		resp.UpdateOption(o)
	}
	return resp
}

// inform is the ACK to an INFORM: the configuration without an address or
// lease times.
func inform(req *dhcpv4.DHCPv4, lease *Lease) *dhcpv4.DHCPv4 {
	resp := newReply(req, dhcpv4.MessageTypeAck, lease.ServerIP)
	resp.ClientIPAddr = copyIPv4(req.ClientIPAddr)
	for _, o := range configOptions(lease) {
		resp.UpdateOption(o)
	}
	return resp
}

// nak refuses a REQUEST for an address that is not the lease's.
func nak(req *dhcpv4.DHCPv4, lease *Lease, requested net.IP) *dhcpv4.DHCPv4 {
	resp := newReply(req, dhcpv4.MessageTypeNak, lease.ServerIP)
	what := "no address"
	if requested != nil {
		what = "address " + requested.String()
	}
	resp.UpdateOption(dhcpv4.OptMessage(fmt.Sprintf("requested %s, the lease is for %s", what, lease.IP.IP)))
	return resp
}

// newReply is a BOOTREPLY to req of the given type with the header fields
// RFC 2131 table 3 copies from the request (xid, flags, giaddr, chaddr), the
// server identifier, and the options a server echoes.
func newReply(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType, serverIP net.IP) *dhcpv4.DHCPv4 {
	resp := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: copyIPv4(req.GatewayIPAddr),
		ClientHWAddr:  append(net.HardwareAddr(nil), req.ClientHWAddr...),
		Options:       make(dhcpv4.Options),
	}
	resp.UpdateOption(dhcpv4.OptMessageType(typ))
	resp.UpdateOption(dhcpv4.OptServerIdentifier(serverIP.To4()))
	for _, code := range []dhcpv4.OptionCode{dhcpv4.OptionClientIdentifier, dhcpv4.OptionRelayAgentInformation} {
		if v := req.Options.Get(code); v != nil {
			resp.UpdateOption(dhcpv4.OptGeneric(code, v))
		}
	}
	return resp
}

// configOptions are the options that configure the guest's network: mask,
// broadcast address, router, DNS, host name, MTU, search list and routes,
// and the VMI's dhcpOptions: TFTP server, boot file, NTP servers and
// private options.
func configOptions(lease *Lease) []dhcpv4.Option {
	opts := []dhcpv4.Option{dhcpv4.OptSubnetMask(lease.IP.Mask)}
	if ones, _ := lease.IP.Mask.Size(); ones <= 30 {
		opts = append(opts, dhcpv4.OptBroadcastAddress(broadcastAddr(lease.IP)))
	}
	if lease.Router != nil {
		opts = append(opts, dhcpv4.OptRouter(lease.Router.To4()))
	}
	if len(lease.DNS) > 0 {
		dns := make([]net.IP, len(lease.DNS))
		for i, ip := range lease.DNS {
			dns[i] = ip.To4()
		}
		opts = append(opts, dhcpv4.OptDNS(dns...))
	}
	if lease.Hostname != "" {
		opts = append(opts, dhcpv4.OptHostName(lease.Hostname))
	}
	if lease.MTU != 0 {
		opts = append(opts, dhcpv4.Option{Code: dhcpv4.OptionInterfaceMTU, Value: dhcpv4.Uint16(lease.MTU)})
	}
	if len(lease.SearchDomains) > 0 {
		opts = append(opts, dhcpv4.OptDomainSearch(searchLabels(lease.SearchDomains)))
	}
	if len(lease.Routes) > 0 {
		opts = append(opts, dhcpv4.OptClasslessStaticRoute(classlessRoutes(lease.Routes, lease.Router)...))
	}
	if lease.TFTPServerName != "" {
		opts = append(opts, dhcpv4.OptTFTPServerName(lease.TFTPServerName))
	}
	if lease.BootFileName != "" {
		opts = append(opts, dhcpv4.OptBootFileName(lease.BootFileName))
	}
	if len(lease.NTPServers) > 0 {
		ntp := make([]net.IP, len(lease.NTPServers))
		for i, ip := range lease.NTPServers {
			ntp[i] = ip.To4()
		}
		opts = append(opts, dhcpv4.OptNTPServers(ntp...))
	}
	for _, o := range lease.PrivateOptions {
		opts = append(opts, dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(o.Code), o.Value))
	}
	return opts
}

// leaseTimeOptions are the lease time (51) and the renewal (58, T1) and
// rebinding (59, T2) times at RFC 2131's defaults of 1/2 and 7/8 of it.
func leaseTimeOptions(lease *Lease) []dhcpv4.Option {
	d := lease.leaseTime()
	return []dhcpv4.Option{
		dhcpv4.OptIPAddressLeaseTime(d),
		dhcpv4.OptRenewTimeValue(d / 2),
		dhcpv4.OptRebindingTimeValue(d - d/8),
	}
}

// searchLabels is the domain search list in option 119's RFC 1035 encoding,
// without a trailing dot (the encoding ends every name at the root).
func searchLabels(domains []string) *rfc1035label.Labels {
	names := make([]string, len(domains))
	for i, d := range domains {
		names[i] = strings.TrimSuffix(d, ".")
	}
	return &rfc1035label.Labels{Labels: names}
}

// classlessRoutes converts the lease's routes for option 121 and, when the
// lease has a router and the routes no default route, adds one through it:
// a client that accepts option 121 ignores the router option (RFC 3442).
func classlessRoutes(routes []Route, router net.IP) []*dhcpv4.Route {
	out := make([]*dhcpv4.Route, 0, len(routes)+1)
	hasDefault := false
	for _, r := range routes {
		ones, _ := r.Dest.Mask.Size()
		hasDefault = hasDefault || ones == 0
		gw := net.IPv4zero.To4()
		if !isUnspecified(r.Gateway) {
			gw = r.Gateway.To4()
		}
		out = append(out, &dhcpv4.Route{
			Dest:   &net.IPNet{IP: r.Dest.IP.To4(), Mask: r.Dest.Mask},
			Router: gw,
		})
	}
	if router != nil && !hasDefault {
		out = append(out, &dhcpv4.Route{
			Dest:   &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 8*net.IPv4len)},
			Router: router.To4(),
		})
	}
	return out
}

// copyIPv4 returns ip in 4-byte form, 0.0.0.0 for nil.
func copyIPv4(ip net.IP) net.IP {
	if ip4 := ip.To4(); ip4 != nil {
		return append(net.IP(nil), ip4...)
	}
	return net.IPv4zero.To4()
}
