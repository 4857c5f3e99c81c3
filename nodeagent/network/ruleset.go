package network

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The masquerade binding's addresses (KubeVirt's defaults), as functions:
// every caller gets its own copy.
const masqCIDR = "10.0.2.0/24"

func masqGatewayIP() net.IP { return net.IPv4(10, 0, 2, 1).To4() }
func masqGuestIP() net.IP   { return net.IPv4(10, 0, 2, 2).To4() }
func masqMask() net.IPMask  { return net.CIDRMask(24, 32) }
func loopbackIP() net.IP    { return net.IPv4(127, 0, 0, 1).To4() }

// masqBridgeMAC is the masquerade bridge's MAC, KubeVirt's, the same in
// every launcher pod: a guest that migrates keeps its gateway's MAC and
// its IPv6 router's link-local address (derived from the MAC), so its
// neighbor and default router entries stay valid. The bridge is on no
// link but the guest's.
func masqBridgeMAC() net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0, 0} }

// The masquerade binding's IPv6 addresses (KubeVirt's defaults), used when
// the pod has an IPv6 address: the guest at fd10:0:2::2/120 behind the
// bridge's fd10:0:2::1.
const (
	masqCIDR6      = "fd10:0:2::/120"
	masqPrefixLen6 = 120
)

func masqGatewayIP6() net.IP { return net.ParseIP("fd10:0:2::1") }
func masqGuestIP6() net.IP   { return net.ParseIP("fd10:0:2::2") }
func loopbackIP6() net.IP    { return net.IPv6loopback }

// KubeVirt's names in table ip nat.
const (
	natTable        = "nat"
	chainPreInbound = "KUBEVIRT_PREINBOUND"
	chainPostInbnd  = "KUBEVIRT_POSTINBOUND"
)

// natChain is a chain of the NAT table; Hook is empty for a regular chain.
type natChain struct {
	Name     string
	Hook     string // "prerouting", "postrouting" or "output"
	Priority int32  // -100 (dstnat) or 100 (srcnat)
}

// natRule is one rule: all set matches, then one action.
type natRule struct {
	Chain string

	IIfName string
	OIfName string
	SAddr   net.IP
	DAddr   net.IP
	Proto   string // "tcp" or "udp" with DPort; "" matches any
	DPort   uint16

	Jump string
	Masq bool
	DNAT net.IP
	SNAT net.IP
}

// natRuleset is table ip nat (or ip6 nat) as the masquerade binding
// programs it.
type natRuleset struct {
	IPv6   bool // table ip6 nat, else table ip nat
	Table  string
	Chains []natChain
	Rules  []natRule
}

// Ruleset returns the nftables rule set Setup installs for a masquerade
// interface, as nft(8) prints it (nft list table ip nat), for logs, docs and
// tests. It is rendered from the same description Setup programs. Other
// bindings install no rules: "".
func Ruleset(iface Interface) string {
	if iface.Binding != BindingMasquerade {
		return ""
	}
	return masqueradeRuleset(iface, false).String()
}

// Ruleset6 is Ruleset's IPv6 counterpart (nft list table ip6 nat), which
// Setup installs as well when the pod has an IPv6 address.
func Ruleset6(iface Interface) string {
	if iface.Binding != BindingMasquerade {
		return ""
	}
	return masqueradeRuleset(iface, true).String()
}

// masqueradeRuleset is KubeVirt's NAT for the masquerade binding: the guest
// at 10.0.2.2 (fd10:0:2::2 in table ip6 nat) leaves with the pod's IP, and
// what reaches the pod on its pod interface (or localhost inside the pod)
// is forwarded to the guest: every port, or only iface.Ports.
func masqueradeRuleset(iface Interface, ipv6 bool) natRuleset {
	guest, gateway, loopback := masqGuestIP(), masqGatewayIP(), loopbackIP()
	if ipv6 {
		guest, gateway, loopback = masqGuestIP6(), masqGatewayIP6(), loopbackIP6()
	}
	rs := natRuleset{
		IPv6:  ipv6,
		Table: natTable,
		Chains: []natChain{
			{Name: "prerouting", Hook: "prerouting", Priority: -100},
			{Name: "postrouting", Hook: "postrouting", Priority: 100},
			{Name: "output", Hook: "output", Priority: -100},
			{Name: chainPreInbound},
			{Name: chainPostInbnd},
		},
	}
	add := func(r natRule) { rs.Rules = append(rs.Rules, r) }
	add(natRule{Chain: "prerouting", IIfName: iface.PodInterface, Jump: chainPreInbound})
	add(natRule{Chain: "postrouting", SAddr: guest, Masq: true})
	add(natRule{Chain: "postrouting", OIfName: iface.Bridge, Jump: chainPostInbnd})
	if len(iface.Ports) == 0 {
		add(natRule{Chain: "output", DAddr: loopback, DNAT: guest})
		add(natRule{Chain: chainPreInbound, DNAT: guest})
	}
	for _, p := range iface.Ports {
		proto, port := strings.ToLower(p.Protocol), uint16(p.Port)
		add(natRule{Chain: "output", DAddr: loopback, Proto: proto, DPort: port, DNAT: guest})
		add(natRule{Chain: chainPreInbound, Proto: proto, DPort: port, DNAT: guest})
	}
	add(natRule{Chain: chainPostInbnd, SAddr: loopback, SNAT: gateway})
	return rs
}

// String renders rs as nft list table prints it.
func (rs natRuleset) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", rs.family(), rs.Table)
	for i, c := range rs.Chains {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
		if c.Hook != "" {
			fmt.Fprintf(&b, "\t\ttype nat hook %s priority %s; policy accept;\n", c.Hook, priorityName(c.Hook, c.Priority))
		}
		for _, r := range rs.Rules {
			if r.Chain == c.Name {
				fmt.Fprintf(&b, "\t\t%s\n", r)
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// family is the table's family as nft(8) names it.
func (rs natRuleset) family() string {
	if rs.IPv6 {
		return "ip6"
	}
	return "ip"
}

// tableFamily is the table's family for the nftables library.
func (rs natRuleset) tableFamily() nftables.TableFamily {
	if rs.IPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// priorityName is how nft(8) prints a chain's priority: by its standard
// name where that name belongs to the hook (nft 1.0.6 knows dstnat only at
// prerouting and srcnat only at postrouting).
func priorityName(hook string, p int32) string {
	switch {
	case hook == "prerouting" && p == -100:
		return "dstnat"
	case hook == "postrouting" && p == 100:
		return "srcnat"
	}
	return strconv.Itoa(int(p))
}

// String renders r in nft syntax.
func (r natRule) String() string {
	var parts []string
	if r.IIfName != "" {
		parts = append(parts, "iifname "+strconv.Quote(r.IIfName))
	}
	if r.OIfName != "" {
		parts = append(parts, "oifname "+strconv.Quote(r.OIfName))
	}
	if r.SAddr != nil {
		parts = append(parts, addrFamily(r.SAddr)+" saddr "+r.SAddr.String())
	}
	if r.DAddr != nil {
		parts = append(parts, addrFamily(r.DAddr)+" daddr "+r.DAddr.String())
	}
	if r.Proto != "" {
		parts = append(parts, r.Proto+" dport "+strconv.Itoa(int(r.DPort)))
	}
	switch {
	case r.Jump != "":
		parts = append(parts, "jump "+r.Jump)
	case r.Masq:
		parts = append(parts, "masquerade")
	case r.DNAT != nil:
		parts = append(parts, "dnat to "+r.DNAT.String())
	case r.SNAT != nil:
		parts = append(parts, "snat to "+r.SNAT.String())
	}
	return strings.Join(parts, " ")
}

// Exprs is r as nftables expressions, as nft(8) would compile it.
func (r natRule) Exprs() []expr.Any {
	var e []expr.Any
	if r.IIfName != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, cmpEq(ifname(r.IIfName)))
	}
	if r.OIfName != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, cmpEq(ifname(r.OIfName)))
	}
	if r.SAddr != nil {
		e = append(e, addrMatch(r.SAddr, false)...)
	}
	if r.DAddr != nil {
		e = append(e, addrMatch(r.DAddr, true)...)
	}
	if r.Proto != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmpEq([]byte{l4proto(r.Proto)}),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			cmpEq(binaryutil.BigEndian.PutUint16(r.DPort)))
	}
	switch {
	case r.Jump != "":
		e = append(e, &expr.Verdict{Kind: expr.VerdictJump, Chain: r.Jump})
	case r.Masq:
		e = append(e, &expr.Masq{})
	case r.DNAT != nil:
		e = append(e, natTo(expr.NATTypeDestNAT, r.DNAT)...)
	case r.SNAT != nil:
		e = append(e, natTo(expr.NATTypeSourceNAT, r.SNAT)...)
	}
	return e
}

// addrFamily is how nft(8) names ip's header: ip or ip6.
func addrFamily(ip net.IP) string {
	if ip.To4() != nil {
		return "ip"
	}
	return "ip6"
}

// addrMatch compares the packet's source (or destination) address with ip,
// in the IPv4 or IPv6 header as ip is.
func addrMatch(ip net.IP, dst bool) []expr.Any {
	if v4 := ip.To4(); v4 != nil {
		off := uint32(12)
		if dst {
			off = 16
		}
		return []expr.Any{ipHeader(off, 4), cmpEq(v4)}
	}
	off := uint32(8)
	if dst {
		off = 24
	}
	return []expr.Any{ipHeader(off, 16), cmpEq(ip.To16())}
}

func ipHeader(offset, n uint32) *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: n}
}

func cmpEq(data []byte) *expr.Cmp {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data}
}

func natTo(t expr.NATType, ip net.IP) []expr.Any {
	data, family := ip.To4(), uint32(unix.NFPROTO_IPV4)
	if data == nil {
		data, family = ip.To16(), unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: data},
		&expr.NAT{Type: t, Family: family, RegAddrMin: 1, RegAddrMax: 1},
	}
}

func l4proto(p string) byte {
	if p == "udp" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// ifname is an interface name as nft compares it: NUL-padded to IFNAMSIZ.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// nftChain is c of table t for the nftables library.
func (c natChain) nftChain(t *nftables.Table) *nftables.Chain {
	ch := &nftables.Chain{Name: c.Name, Table: t}
	if c.Hook == "" {
		return ch
	}
	ch.Type = nftables.ChainTypeNAT
	ch.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(c.Priority))
	switch c.Hook {
	case "prerouting":
		ch.Hooknum = nftables.ChainHookPrerouting
	case "postrouting":
		ch.Hooknum = nftables.ChainHookPostrouting
	case "output":
		ch.Hooknum = nftables.ChainHookOutput
	}
	return ch
}
