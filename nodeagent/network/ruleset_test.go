package network

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestRuleset(t *testing.T) {
	tests := []struct {
		name  string
		iface Interface
		want  string
	}{{
		name:  "every port",
		iface: podIface("default", 0, BindingMasquerade),
		want: `table ip nat {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		iifname "eth0" jump KUBEVIRT_PREINBOUND
	}

	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.0.2.2 masquerade
		oifname "k6t-eth0" jump KUBEVIRT_POSTINBOUND
	}

	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr 127.0.0.1 dnat to 10.0.2.2
	}

	chain KUBEVIRT_PREINBOUND {
		dnat to 10.0.2.2
	}

	chain KUBEVIRT_POSTINBOUND {
		ip saddr 127.0.0.1 snat to 10.0.2.1
	}
}
`,
	}, {
		name: "a TCP and a UDP port",
		iface: withPlanned(podIface("default", 0, BindingMasquerade), func(i *Interface) {
			i.Ports = []v1.Port{{Port: 80, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}
		}),
		want: `table ip nat {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		iifname "eth0" jump KUBEVIRT_PREINBOUND
	}

	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.0.2.2 masquerade
		oifname "k6t-eth0" jump KUBEVIRT_POSTINBOUND
	}

	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr 127.0.0.1 tcp dport 80 dnat to 10.0.2.2
		ip daddr 127.0.0.1 udp dport 53 dnat to 10.0.2.2
	}

	chain KUBEVIRT_PREINBOUND {
		tcp dport 80 dnat to 10.0.2.2
		udp dport 53 dnat to 10.0.2.2
	}

	chain KUBEVIRT_POSTINBOUND {
		ip saddr 127.0.0.1 snat to 10.0.2.1
	}
}
`,
	}, {
		name:  "bridge binding has none",
		iface: podIface("default", 0, BindingBridge),
		want:  "",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Ruleset(tt.iface)); diff != "" {
				t.Errorf("Ruleset (-want +got):\n%s", diff)
			}
		})
	}
}

// Every rule Setup programs compiles to expressions, and jumps only to
// chains of the rule set.
func TestRulesetExprs(t *testing.T) {
	iface := withPlanned(podIface("default", 0, BindingMasquerade), func(i *Interface) {
		i.Ports = []v1.Port{{Port: 80, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}
	})
	rs := masqueradeRuleset(iface, false)
	chains := map[string]bool{}
	for _, c := range rs.Chains {
		chains[c.Name] = true
	}
	for _, r := range rs.Rules {
		if !chains[r.Chain] || (r.Jump != "" && !chains[r.Jump]) {
			t.Errorf("rule %q in chain %q refers to a chain outside the rule set", r, r.Chain)
		}
		if len(r.Exprs()) == 0 {
			t.Errorf("rule %q has no expressions", r)
		}
	}
}
