package network

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// The pod's and the node's IPv6 addresses of a dual-stack testNet.
const (
	podIP6  = "fd00:77::5"
	nodeIP6 = "fd00:77::1"
)

// addIPv6 makes n dual stack, as a CNI plugin would: podIP6/64 on the
// pod's eth0 with a default route through nodeIP6 on the node's gw0.
func (n *testNet) addIPv6() {
	n.t.Helper()
	for _, args := range [][]string{
		{"-n", n.node, "addr", "add", nodeIP6 + "/64", "dev", "gw0", "nodad"},
		{"-n", n.pod, "addr", "add", podIP6 + "/64", "dev", "eth0", "nodad"},
		{"-n", n.pod, "-6", "route", "add", "default", "via", nodeIP6},
	} {
		run(n.t, "ip", args...)
	}
}

// TestSetupBridgeDualStack wires the bridge binding in a pod with an IPv4
// and an IPv6 address: the guest takes both, the pod routes what the guest
// sends its router back onto the link, and the router advertisements for
// the guest reach the guest and not the node's side of the pod network.
func TestSetupBridgeDualStack(t *testing.T) {
	n := newTestNet(t)
	n.addIPv6()
	origMAC := links(t, n.pod)["eth0"].Address
	iface := podIface("default", 0, BindingBridge)
	got := setupTwice(t, n, []Interface{iface}, func() {})
	if len(got) != 1 {
		t.Fatalf("Setup returned %d results, want 1", len(got))
	}
	want6 := &dhcp.Lease6{ServerInterface: "k6t-eth0", IP: net.ParseIP(podIP6), PrefixLen: 64, MTU: testMTU}
	if diff := cmp.Diff(want6, got[0].Lease6); diff != "" {
		t.Errorf("Lease6 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{testPodIP, podIP6}, got[0].PodIPs); diff != "" {
		t.Errorf("PodIPs (-want +got):\n%s", diff)
	}
	if addrs := run(t, "ip", "-n", n.pod, "-6", "addr", "show", "dev", "eth0", "scope", "global"); strings.Contains(addrs, podIP6) {
		t.Errorf("eth0 kept %s, which is the guest's:\n%s", podIP6, addrs)
	}
	routes := run(t, "ip", "-n", n.pod, "-6", "route", "show")
	for _, want := range []string{"fd00:77::/64 dev k6t-eth0", "default via " + nodeIP6 + " dev k6t-eth0"} {
		if !strings.Contains(routes, want) {
			t.Errorf("the pod's IPv6 routes lack %q:\n%s", want, routes)
		}
	}
	if v := sysctl(t, n.pod, "net.ipv6.conf.all.forwarding"); v != "1" {
		t.Errorf("net.ipv6.conf.all.forwarding = %s in the pod, want 1", v)
	}
	filter := run(t, "ip", "netns", "exec", n.pod, "nft", "list", "table", "bridge", guestFilterTable)
	for _, want := range []string{`oifname "eth0" icmpv6 type nd-router-advert drop`, `oifname "eth0" udp sport 547 drop`} {
		if !strings.Contains(filter, want) {
			t.Errorf("table bridge %s lacks %q:\n%s", guestFilterTable, want, filter)
		}
	}

	// The stand-in guest with the pod's addresses and MAC.
	n.addGuest(origMAC, testPodIP+"/24", testNodeIP)
	run(t, "ip", "-n", n.guest, "addr", "add", podIP6+"/64", "dev", "eth0", "nodad")
	ctx, cancel := context.WithCancel(context.Background())
	advertised := make(chan error, 1)
	go func() {
		advertised <- inTestNamespace(n.pod, func() error { return dhcp.Advertise(ctx, *got[0].Lease6) })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-advertised; err != nil {
			t.Errorf("Advertise: %v", err)
		}
	})
	// The guest takes the pod as its router; the node's side (a fresh
	// namespace that accepts advertisements) hears none.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(run(t, "ip", "-n", n.guest, "-6", "route", "show", "default"), "proto ra") {
		if time.Now().After(deadline) {
			t.Fatalf("the guest got no default route from the advertisements:\n%s", run(t, "ip", "-n", n.guest, "-6", "route"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := run(t, "ip", "-n", n.node, "-6", "route", "show", "default"); strings.Contains(r, "proto ra") {
		t.Errorf("the node's side took the pod's advertisement: %s", r)
	}

	guest := listen(t, n.guest, "["+podIP6+"]:8083")
	if from := connect(t, n.node, "["+podIP6+"]:8083", guest); from != nodeIP6 {
		t.Errorf("node -> guest over IPv6 arrived from %s, want %s", from, nodeIP6)
	}
	node := listen(t, n.node, "["+nodeIP6+"]:9091")
	if from := connect(t, n.guest, "["+nodeIP6+"]:9091", node); from != podIP6 {
		t.Errorf("guest -> node over IPv6 arrived from %s, want the guest's (the pod's) %s", from, podIP6)
	}
}
