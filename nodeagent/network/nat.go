package network

import (
	"bytes"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// installNAT programs rs in the network namespace of nsFd, in one atomic
// batch: its chains are created if missing and flushed, then filled. It
// leaves other chains of the table alone, and writes nothing when the
// chains already hold exactly rs (a second Setup).
func installNAT(nsFd int, rs natRuleset) error {
	conn, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	table := &nftables.Table{Name: rs.Table, Family: rs.tableFamily()}
	if natInstalled(conn, table, rs) {
		return nil
	}
	conn.AddTable(table)
	chains := make(map[string]*nftables.Chain, len(rs.Chains))
	for _, c := range rs.Chains {
		ch := conn.AddChain(c.nftChain(table))
		conn.FlushChain(ch)
		chains[c.Name] = ch
	}
	for _, r := range rs.Rules {
		conn.AddRule(&nftables.Rule{Table: table, Chain: chains[r.Chain], Exprs: r.Exprs()})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("programming table %s %s: %w", rs.family(), rs.Table, err)
	}
	return nil
}

// natInstalled reports whether rs's chains exist in table with rs's hooks
// and exactly rs's rules. Any error reading them counts as not installed:
// the write that follows reports what is wrong.
func natInstalled(conn *nftables.Conn, table *nftables.Table, rs natRuleset) bool {
	for _, c := range rs.Chains {
		got, err := conn.ListChain(table, c.Name)
		if err != nil || !sameHook(got, c.nftChain(table)) {
			return false
		}
		rules, err := conn.GetRules(table, got)
		if err != nil {
			return false
		}
		var want []natRule
		for _, r := range rs.Rules {
			if r.Chain == c.Name {
				want = append(want, r)
			}
		}
		if len(rules) != len(want) {
			return false
		}
		for k := range want {
			if !sameExprs(rs.tableFamily(), rules[k].Exprs, want[k].Exprs()) {
				return false
			}
		}
	}
	return true
}

func sameHook(a, b *nftables.Chain) bool {
	if (a.Hooknum == nil) != (b.Hooknum == nil) || (a.Priority == nil) != (b.Priority == nil) {
		return false
	}
	if a.Hooknum != nil && (*a.Hooknum != *b.Hooknum || a.Type != b.Type) {
		return false
	}
	return a.Priority == nil || *a.Priority == *b.Priority
}

// sameExprs compares expressions by their netlink encoding.
func sameExprs(family nftables.TableFamily, a, b []expr.Any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, errX := expr.Marshal(byte(family), a[i])
		y, errY := expr.Marshal(byte(family), b[i])
		if errX != nil || errY != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}
