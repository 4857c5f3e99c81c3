package network

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// guestFilterTable is the bridge-family table that keeps the bridge
// binding's IPv6 servers talking only to the guest.
const guestFilterTable = "vmkit-guest"

// ICMPv6 router advertisement, and the DHCPv6 server port.
const (
	icmpv6RouterAdvert = 134
	dhcpv6ServerPort   = 547
)

// installGuestFilter drops, on their way out of the pod interface
// podIface, the router advertisements and DHCPv6 answers the pod sends
// from the bridge: they are for the guest, and the pod interface is a
// port of the same bridge, so they would otherwise reach every pod and
// guest on the pod network, which would take the pod for their router or
// the guest's address for their own. It is table bridge vmkit-guest,
// chain output; a second call finds it in place and changes nothing.
func installGuestFilter(nsFd int, podIface string) error {
	conn, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	table := &nftables.Table{Name: guestFilterTable, Family: nftables.TableFamilyBridge}
	chain := &nftables.Chain{Name: "output", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter}
	want := guestFilterRules(podIface)
	if got, err := conn.ListChain(table, chain.Name); err == nil && sameHook(got, chain) {
		if rules, err := conn.GetRules(table, got); err == nil && len(rules) == len(want) {
			same := true
			for i := range want {
				same = same && sameExprs(nftables.TableFamilyBridge, rules[i].Exprs, want[i])
			}
			if same {
				return nil
			}
		}
	}
	conn.AddTable(table)
	ch := conn.AddChain(chain)
	conn.FlushChain(ch)
	for _, e := range want {
		conn.AddRule(&nftables.Rule{Table: table, Chain: ch, Exprs: e})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("programming table bridge %s: %w", guestFilterTable, err)
	}
	return nil
}

// guestFilterRules are, as nft(8) would compile them:
//
//	oifname "eth0" meta l4proto ipv6-icmp icmpv6 type nd-router-advert drop
//	oifname "eth0" meta l4proto udp udp sport 547 drop
func guestFilterRules(podIface string) [][]expr.Any {
	oif := []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, cmpEq(ifname(podIface))}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	ra := append(append([]expr.Any{}, oif...),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmpEq([]byte{unix.IPPROTO_ICMPV6}),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		cmpEq([]byte{icmpv6RouterAdvert}), drop)
	dhcp := append(append([]expr.Any{}, oif...),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmpEq([]byte{unix.IPPROTO_UDP}),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		cmpEq(binaryutil.BigEndian.PutUint16(dhcpv6ServerPort)), drop)
	return [][]expr.Any{ra, dhcp}
}
