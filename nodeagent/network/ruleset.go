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

// natRuleset is table ip nat as the masquerade binding programs it.
type natRuleset struct {
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
	return masqueradeRuleset(iface).String()
}

// masqueradeRuleset is KubeVirt's NAT for the masquerade binding: the guest
// at 10.0.2.2 leaves with the pod's IP, and what reaches the pod on its pod
// interface (or localhost inside the pod) is forwarded to the guest: every
// port, or only iface.Ports.
func masqueradeRuleset(iface Interface) natRuleset {
	rs := natRuleset{
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
	add(natRule{Chain: "postrouting", SAddr: masqGuestIP(), Masq: true})
	add(natRule{Chain: "postrouting", OIfName: iface.Bridge, Jump: chainPostInbnd})
	if len(iface.Ports) == 0 {
		add(natRule{Chain: "output", DAddr: loopbackIP(), DNAT: masqGuestIP()})
		add(natRule{Chain: chainPreInbound, DNAT: masqGuestIP()})
	}
	for _, p := range iface.Ports {
		proto, port := strings.ToLower(p.Protocol), uint16(p.Port)
		add(natRule{Chain: "output", DAddr: loopbackIP(), Proto: proto, DPort: port, DNAT: masqGuestIP()})
		add(natRule{Chain: chainPreInbound, Proto: proto, DPort: port, DNAT: masqGuestIP()})
	}
	add(natRule{Chain: chainPostInbnd, SAddr: loopbackIP(), SNAT: masqGatewayIP()})
	return rs
}

// String renders rs as nft list table prints it.
func (rs natRuleset) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", rs.Table)
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
		parts = append(parts, "ip saddr "+r.SAddr.String())
	}
	if r.DAddr != nil {
		parts = append(parts, "ip daddr "+r.DAddr.String())
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
		e = append(e, ipHeader(12, 4), cmpEq(r.SAddr.To4()))
	}
	if r.DAddr != nil {
		e = append(e, ipHeader(16, 4), cmpEq(r.DAddr.To4()))
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

func ipHeader(offset, n uint32) *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: n}
}

func cmpEq(data []byte) *expr.Cmp {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data}
}

func natTo(t expr.NATType, ip net.IP) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: ip.To4()},
		&expr.NAT{Type: t, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1},
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
