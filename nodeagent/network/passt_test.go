package network

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestPlanPasst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports []v1.Port
		want  []string
	}{{
		name: "no ports: every port of both protocols, as KubeVirt forwards",
		want: []string{"--tcp-ports", "all", "--udp-ports", "all"},
	}, {
		name:  "TCP ports only: no UDP",
		ports: []v1.Port{{Port: 22}, {Port: 80, Protocol: "TCP"}, {Port: 22}},
		want:  []string{"--tcp-ports", "22,80", "--udp-ports", "none"},
	}, {
		name:  "both",
		ports: []v1.Port{{Port: 53, Protocol: "UDP"}, {Port: 8080}},
		want:  []string{"--tcp-ports", "8080", "--udp-ports", "53"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := vmiWith([]v1.Interface{{Name: "default", Ports: tc.ports,
				InterfaceBindingMethod: v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}}},
				[]v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}})
			plan, err := Plan(vmi)
			if err != nil {
				t.Fatal(err)
			}
			iface, ok := PasstInterface(plan)
			if !ok || iface.Binding != BindingPasst {
				t.Fatalf("plan %+v has no passt interface", plan)
			}
			if diff := cmp.Diff(tc.want, PasstArgs(iface)); diff != "" {
				t.Errorf("PasstArgs (-want +got):\n%s", diff)
			}
		})
	}
	masq := vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}},
		[]v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}})
	plan, err := Plan(masq)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := PasstInterface(plan); ok {
		t.Error("a masquerade plan has a passt interface")
	}
}
