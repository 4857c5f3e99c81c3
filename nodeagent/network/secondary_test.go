package network

import (
	"fmt"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// TestSetupSecondaryBridge wires a Multus secondary network as a CNI would
// leave it in the pod (pod<hash>, a veth to the node's namespace, with or
// without an address) beside the pod network, and checks the bridge
// binding on it: k6t-<hash> with the pod interface and tap1 as ports, the
// guest's lease (or none on a layer-2 network), and traffic between a
// stand-in guest on the bridge and the node's side of the network.
func TestSetupSecondaryBridge(t *testing.T) {
	const (
		podIf  = "pod16477688c0e" // KubeVirt's name for network "blue"
		bridge = "k6t-16477688c0e"
		nodeIP = "10.250.0.1"
		podIP  = "10.250.0.5"
	)
	for _, tt := range []struct {
		name string
		ipam bool
	}{{"layer 2, no address", false}, {"an address from the network's IPAM", true}} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNet(t)
			run(t, "ip", "-n", n.node, "link", "add", "sec0", "mtu", fmt.Sprint(testMTU), "type", "veth",
				"peer", "name", podIf, "mtu", fmt.Sprint(testMTU), "netns", n.pod)
			run(t, "ip", "-n", n.node, "addr", "add", nodeIP+"/24", "dev", "sec0")
			run(t, "ip", "-n", n.node, "link", "set", "sec0", "up")
			run(t, "ip", "-n", n.pod, "link", "set", podIf, "up")
			if tt.ipam {
				run(t, "ip", "-n", n.pod, "addr", "add", podIP+"/24", "dev", podIf)
			}
			podMAC, _ := net.ParseMAC(links(t, n.pod)[podIf].Address)
			secondary := Interface{Name: "blue", Index: 1, Binding: BindingBridge, PodInterface: podIf, Tap: "tap1", Bridge: bridge, Secondary: true}
			plan := []Interface{podIface("default", 0, BindingMasquerade), secondary}
			got := setupTwice(t, n, plan, func() {})

			want := Result{Interface: "blue", PodInterface: podIf, MAC: podMAC.String()}
			if tt.ipam {
				want.Lease = dhcp.Lease{ServerInterface: bridge, ServerIP: net.IPv4(169, 254, 75, 12).To4(), ClientMAC: podMAC,
					IP: cidr(t, podIP+"/24"), MTU: testMTU}
				want.PodIPs = []string{podIP}
			}
			if len(got) != 2 || got[0].Interface != "default" {
				t.Fatalf("Setup returned %+v, want the pod network's result, then blue's", got)
			}
			if diff := cmp.Diff(want, got[1]); diff != "" {
				t.Errorf("Setup's result for the secondary network (-want +got):\n%s", diff)
			}

			l := links(t, n.pod)
			pod, br, tap := l[podIf], l[bridge], l["tap1"]
			if pod.Master != bridge || len(pod.ipv4()) != 0 || !pod.up() {
				t.Errorf("%s: master %q, addresses %v, flags %v; want %s, none, UP", podIf, pod.Master, pod.ipv4(), pod.Flags, bridge)
			}
			wantBrAddrs := []string(nil)
			if tt.ipam {
				wantBrAddrs = []string{"169.254.75.12/32"}
			}
			if br.LinkInfo.InfoKind != "bridge" || !br.up() || !cmp.Equal(br.ipv4(), wantBrAddrs) {
				t.Errorf("%s: %s, flags %v, addresses %v; want an UP bridge with %v", bridge, br.LinkInfo.InfoKind, br.Flags, br.ipv4(), wantBrAddrs)
			}
			if tap.LinkInfo.InfoKind != "tun" || tap.Master != bridge || !tap.up() {
				t.Errorf("tap1: %s, master %q, flags %v; want a tap on %s, UP", tap.LinkInfo.InfoKind, tap.Master, tap.Flags, bridge)
			}
			if l["k6t-eth0"].Master != "" || l["tap0"].Master != "k6t-eth0" {
				t.Errorf("the pod network's devices: tap0 on %q; want k6t-eth0", l["tap0"].Master)
			}

			// A stand-in guest on the secondary bridge, with the address the
			// lease gives (or one set by hand on the layer-2 network), reaches
			// the node's side of the network and is reached from it.
			addNamespace(t, n.guest)
			run(t, "ip", "-n", n.pod, "link", "add", "vg1", "mtu", fmt.Sprint(testMTU), "type", "veth",
				"peer", "name", "eth1", "mtu", fmt.Sprint(testMTU), "netns", n.guest)
			for _, a := range [][]string{
				{"-n", n.pod, "link", "set", "vg1", "master", bridge, "up"},
				{"-n", n.guest, "link", "set", "eth1", "address", podMAC.String()},
				{"-n", n.guest, "addr", "add", podIP + "/24", "dev", "eth1"},
				{"-n", n.guest, "link", "set", "eth1", "up"},
			} {
				run(t, "ip", a...)
			}
			guest := listen(t, n.guest, ":8080")
			if from := connect(t, n.node, podIP+":8080", guest); from != nodeIP {
				t.Errorf("node -> guest on the secondary network reached it from %s, want %s", from, nodeIP)
			}
			node := listen(t, n.node, nodeIP+":9090")
			if from := connect(t, n.guest, nodeIP+":9090", node); from != podIP {
				t.Errorf("guest -> node on the secondary network reached it from %s, want %s", from, podIP)
			}
		})
	}
}
