package network

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// These tests build a pod the way a CNI plugin would: namespace "pod" with
// eth0 (10.244.7.5/24, MTU 1450, default route via 10.244.7.1 and two more
// routes), the peer of a veth whose other end, gw0, sits in namespace "node"
// as the pod's gateway. Then they run Setup on the pod and check the result
// with ip(8) and nft(8), and by connecting through it from a stand-in guest:
// a third namespace "guest" on a veth in the bridge instead of a VM on tap0.
// They need root, ip (iproute2) and nft (nftables).

const (
	testPodIP  = "10.244.7.5"
	testNodeIP = "10.244.7.1"
	testMTU    = 1450
)

var testOpts = Options{TapOwner: 4107, TapGroup: 4108}

func requireNetAdmin(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests create network namespaces: run them as root (sudo go test ./nodeagent/network/)")
	}
	for tool, pkg := range map[string]string{"ip": "iproute2", "nft": "nftables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install it with `apt-get update && apt-get install -y %s`", tool, pkg)
		}
	}
}

// testNet is a pod, its node and a stand-in guest, as network namespaces.
type testNet struct {
	t                *testing.T
	pod, node, guest string
}

func (n *testNet) podPath() string { return "/var/run/netns/" + n.pod }

// run runs a command and returns its standard output; failing fails t.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// addNamespace creates a network namespace that t's cleanup deletes.
func addNamespace(t *testing.T, name string) {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
}

func uniqueName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "vmkit-nt-" + hex.EncodeToString(b)
}

// newTestNet makes the pod and its node.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	requireNetAdmin(t)
	base := uniqueName(t)
	n := &testNet{t: t, pod: base, node: base + "-node", guest: base + "-guest"}
	addNamespace(t, n.node)
	addNamespace(t, n.pod)
	run(t, "ip", "-n", n.node, "link", "add", "gw0", "mtu", fmt.Sprint(testMTU), "type", "veth",
		"peer", "name", "eth0", "mtu", fmt.Sprint(testMTU), "netns", n.pod)
	t.Cleanup(func() { _ = exec.Command("ip", "-n", n.node, "link", "del", "gw0").Run() })
	for _, args := range [][]string{
		{"-n", n.node, "addr", "add", testNodeIP + "/24", "dev", "gw0"},
		{"-n", n.node, "link", "set", "gw0", "up"},
		{"-n", n.node, "link", "set", "lo", "up"},
		{"-n", n.pod, "addr", "add", testPodIP + "/24", "dev", "eth0"},
		{"-n", n.pod, "link", "set", "eth0", "up"},
		{"-n", n.pod, "link", "set", "lo", "up"},
		{"-n", n.pod, "route", "add", "default", "via", testNodeIP},
		{"-n", n.pod, "route", "add", "10.96.0.0/12", "via", "10.244.7.254"},
		{"-n", n.pod, "route", "add", "169.254.1.1/32", "dev", "eth0"},
	} {
		run(t, "ip", args...)
	}
	return n
}

// addGuest puts a stand-in guest on the pod's bridge: namespace guest with
// eth0 (mac, addr, default route via gw), the peer of vg0 in k6t-eth0.
func (n *testNet) addGuest(mac, addr, gw string) {
	t := n.t
	t.Helper()
	addNamespace(t, n.guest)
	run(t, "ip", "-n", n.pod, "link", "add", "vg0", "mtu", fmt.Sprint(testMTU), "type", "veth",
		"peer", "name", "eth0", "mtu", fmt.Sprint(testMTU), "netns", n.guest)
	t.Cleanup(func() { _ = exec.Command("ip", "-n", n.pod, "link", "del", "vg0").Run() })
	args := [][]string{
		{"-n", n.pod, "link", "set", "vg0", "master", "k6t-eth0", "up"},
		{"-n", n.guest, "addr", "add", addr, "dev", "eth0"},
		{"-n", n.guest, "link", "set", "eth0", "up"},
		{"-n", n.guest, "link", "set", "lo", "up"},
		{"-n", n.guest, "route", "add", "default", "via", gw},
	}
	if mac != "" {
		args = append([][]string{{"-n", n.guest, "link", "set", "eth0", "address", mac}}, args...)
	}
	for _, a := range args {
		run(t, "ip", a...)
	}
}

// ipLink is a device as ip -j -d addr show prints it.
type ipLink struct {
	IfName   string   `json:"ifname"`
	Flags    []string `json:"flags"`
	MTU      int      `json:"mtu"`
	Master   string   `json:"master"`
	Address  string   `json:"address"`
	IfAlias  string   `json:"ifalias"`
	LinkInfo struct {
		InfoKind string         `json:"info_kind"`
		InfoData map[string]any `json:"info_data"`
	} `json:"linkinfo"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

func (l ipLink) up() bool {
	for _, f := range l.Flags {
		if f == "UP" {
			return true
		}
	}
	return false
}

// ipv4 lists l's IPv4 addresses as a/len.
func (l ipLink) ipv4() []string {
	var out []string
	for _, a := range l.AddrInfo {
		if a.Family == "inet" {
			out = append(out, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
		}
	}
	return out
}

func links(t *testing.T, ns string) map[string]ipLink {
	t.Helper()
	var list []ipLink
	if err := json.Unmarshal([]byte(run(t, "ip", "-n", ns, "-j", "-d", "addr", "show")), &list); err != nil {
		t.Fatalf("ip -j addr show: %v", err)
	}
	out := make(map[string]ipLink, len(list))
	for _, l := range list {
		out[l.IfName] = l
	}
	return out
}

// nftRules returns the handles of the rules of table ip nat by chain.
func nftRules(t *testing.T, ns string) map[string][]int {
	t.Helper()
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Family string `json:"family"`
				Table  string `json:"table"`
				Chain  string `json:"chain"`
				Handle int    `json:"handle"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	out := run(t, "ip", "netns", "exec", ns, "nft", "-j", "list", "ruleset")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("nft -j list ruleset: %v\n%s", err, out)
	}
	rules := map[string][]int{}
	for _, o := range doc.Nftables {
		if o.Rule != nil && o.Rule.Family == "ip" && o.Rule.Table == "nat" {
			rules[o.Rule.Chain] = append(rules[o.Rule.Chain], o.Rule.Handle)
		}
	}
	return rules
}

func sysctl(t *testing.T, ns, key string) string {
	t.Helper()
	return strings.TrimSpace(run(t, "ip", "netns", "exec", ns, "sysctl", "-n", key))
}

// checkTap checks tap0 as Setup makes it.
func checkTap(t *testing.T, tap ipLink, multiQueue bool) {
	t.Helper()
	d := tap.LinkInfo.InfoData
	if tap.LinkInfo.InfoKind != "tun" || d["type"] != "tap" || d["pi"] != false || d["vnet_hdr"] != true ||
		d["multi_queue"] != multiQueue || d["persist"] != true {
		t.Errorf("tap0 is %s %v, want a persistent tap, no pi, vnet_hdr, multi_queue %v", tap.LinkInfo.InfoKind, d, multiQueue)
	}
	if fmt.Sprint(d["user"]) != fmt.Sprint(testOpts.TapOwner) || fmt.Sprint(d["group"]) != fmt.Sprint(testOpts.TapGroup) {
		t.Errorf("tap0 owned by %v:%v, want %d:%d", d["user"], d["group"], testOpts.TapOwner, testOpts.TapGroup)
	}
	if tap.Master != "k6t-eth0" || tap.MTU != testMTU || !tap.up() {
		t.Errorf("tap0: master %q, MTU %d, flags %v; want k6t-eth0, %d, UP", tap.Master, tap.MTU, tap.Flags, testMTU)
	}
}

// setupTwice runs Setup twice and checks that the second call returns the
// same results.
func setupTwice(t *testing.T, n *testNet, plan []Interface, between func()) []Result {
	t.Helper()
	first, err := Setup(n.podPath(), plan, testOpts)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	between()
	second, err := Setup(n.podPath(), plan, testOpts)
	if err != nil {
		t.Fatalf("second Setup: %v", err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second Setup returned other results (-first +second):\n%s", diff)
	}
	return first
}

func TestSetupMasquerade(t *testing.T) {
	tests := []struct {
		name       string
		ports      []v1.Port
		mac        net.HardwareAddr
		multiQueue bool
		rules      map[string]int // rules per chain
	}{{
		name:  "every port",
		rules: map[string]int{"prerouting": 1, "postrouting": 2, "output": 1, chainPreInbound: 1, chainPostInbnd: 1},
	}, {
		name:       "every port, multi-queue tap",
		multiQueue: true,
		rules:      map[string]int{"prerouting": 1, "postrouting": 2, "output": 1, chainPreInbound: 1, chainPostInbnd: 1},
	}, {
		name:  "TCP 8080 and UDP 5353, spec MAC",
		ports: []v1.Port{{Port: 8080, Protocol: "TCP"}, {Port: 5353, Protocol: "UDP"}},
		mac:   net.HardwareAddr{0x02, 0x42, 0, 0, 0, 0x01},
		rules: map[string]int{"prerouting": 1, "postrouting": 2, "output": 2, chainPreInbound: 2, chainPostInbnd: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNet(t)
			iface := podIface("default", 0, BindingMasquerade)
			iface.Ports, iface.MAC, iface.MultiQueue = tt.ports, tt.mac, tt.multiQueue
			var handles map[string][]int
			got := setupTwice(t, n, []Interface{iface}, func() { handles = nftRules(t, n.pod) })

			want := []Result{{
				Interface: "default", PodInterface: "eth0",
				Lease: dhcp.Lease{
					ServerInterface: "k6t-eth0", ServerIP: net.IPv4(10, 0, 2, 1).To4(), ClientMAC: tt.mac,
					IP: cidr(t, "10.0.2.2/24"), Router: net.IPv4(10, 0, 2, 1).To4(), MTU: testMTU,
				},
				PodIPs: []string{testPodIP},
			}}
			if tt.mac != nil {
				want[0].MAC = tt.mac.String()
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Setup (-want +got):\n%s", diff)
			}

			l := links(t, n.pod)
			br := l["k6t-eth0"]
			if br.LinkInfo.InfoKind != "bridge" || br.MTU != testMTU || !br.up() || !cmp.Equal(br.ipv4(), []string{"10.0.2.1/24"}) {
				t.Errorf("k6t-eth0: %s, MTU %d, flags %v, addresses %v; want an UP bridge, MTU %d, 10.0.2.1/24",
					br.LinkInfo.InfoKind, br.MTU, br.Flags, br.ipv4(), testMTU)
			}
			if br.Address != "02:00:00:00:00:00" {
				t.Errorf("k6t-eth0 has MAC %s, want KubeVirt's static 02:00:00:00:00:00", br.Address)
			}
			checkTap(t, l["tap0"], tt.multiQueue)
			if eth0 := l["eth0"]; eth0.Master != "" || !cmp.Equal(eth0.ipv4(), []string{testPodIP + "/24"}) {
				t.Errorf("eth0: master %q, addresses %v; want none, %s/24 (masquerade leaves it alone)", eth0.Master, eth0.ipv4(), testPodIP)
			}
			for _, key := range []string{"net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet"} {
				if v := sysctl(t, n.pod, key); v != "1" {
					t.Errorf("%s = %s in the pod, want 1", key, v)
				}
			}

			if got, want := run(t, "ip", "netns", "exec", n.pod, "nft", "list", "table", "ip", "nat"), Ruleset(iface); got != want {
				t.Errorf("nft list table ip nat:\n%s\nwant (Ruleset):\n%s", got, want)
			}
			after := nftRules(t, n.pod)
			for chain, count := range tt.rules {
				if len(after[chain]) != count {
					t.Errorf("chain %s has %d rules, want %d", chain, len(after[chain]), count)
				}
			}
			if diff := cmp.Diff(handles, after); diff != "" {
				t.Errorf("second Setup rewrote the rules (handles -first +second):\n%s", diff)
			}

			n.addGuest("", "10.0.2.2/24", "10.0.2.1")
			checkMasqueradeTraffic(t, n, len(tt.ports) > 0)
		})
	}
}

// TestSetupMasqueradeDualStack wires a masquerade interface in a pod with
// an IPv4 and an IPv6 address: the guest gets fd10:0:2::2 behind
// fd10:0:2::1 as well, with table ip6 nat, and IPv6 traffic flows both
// ways through the NAT as IPv4 does.
func TestSetupMasqueradeDualStack(t *testing.T) {
	n := newTestNet(t)
	n.addIPv6()
	iface := podIface("default", 0, BindingMasquerade)
	got := setupTwice(t, n, []Interface{iface}, func() {})
	if len(got) != 1 {
		t.Fatalf("Setup returned %d results, want 1", len(got))
	}
	want6 := &dhcp.Lease6{ServerInterface: "k6t-eth0", IP: net.ParseIP("fd10:0:2::2"), PrefixLen: 120, MTU: testMTU}
	if diff := cmp.Diff(want6, got[0].Lease6); diff != "" {
		t.Errorf("Lease6 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{testPodIP, podIP6}, got[0].PodIPs); diff != "" {
		t.Errorf("PodIPs (-want +got):\n%s", diff)
	}
	if v := sysctl(t, n.pod, "net.ipv6.conf.all.forwarding"); v != "1" {
		t.Errorf("net.ipv6.conf.all.forwarding = %s in the pod, want 1", v)
	}
	if got, want := run(t, "ip", "netns", "exec", n.pod, "nft", "list", "table", "ip6", "nat"), Ruleset6(iface); got != want {
		t.Errorf("nft list table ip6 nat:\n%s\nwant (Ruleset6):\n%s", got, want)
	}
	n.addGuest("", "10.0.2.2/24", "10.0.2.1")
	run(t, "ip", "-n", n.guest, "addr", "add", "fd10:0:2::2/120", "dev", "eth0", "nodad")
	run(t, "ip", "-n", n.guest, "-6", "route", "add", "default", "via", "fd10:0:2::1")
	// The static MAC holds with ports on the bridge: the guest's router is
	// the same in every pod it migrates to.
	if mac := links(t, n.pod)["k6t-eth0"].Address; mac != "02:00:00:00:00:00" {
		t.Errorf("k6t-eth0 has MAC %s with the guest on it, want 02:00:00:00:00:00", mac)
	}

	guest := listen(t, n.guest, "[::]:8082")
	if from := connect(t, n.node, "["+podIP6+"]:8082", guest); from != nodeIP6 {
		t.Errorf("node -> [pod]:8082 reached the guest from %s, want %s (DNAT only)", from, nodeIP6)
	}
	node := listen(t, n.node, "["+nodeIP6+"]:9090")
	if from := connect(t, n.guest, "["+nodeIP6+"]:9090", node); from != podIP6 {
		t.Errorf("guest -> node reached the node from %s, want the pod IP %s", from, podIP6)
	}
	checkMasqueradeTraffic(t, n, false)
}

// checkMasqueradeTraffic connects to the guest from the node and from the
// pod's localhost, and from the guest to the node.
func checkMasqueradeTraffic(t *testing.T, n *testNet, onlyListed bool) {
	guest := listen(t, n.guest, ":8080")
	if from := connect(t, n.node, testPodIP+":8080", guest); from != testNodeIP {
		t.Errorf("node -> pod:8080 reached the guest from %s, want %s (DNAT only)", from, testNodeIP)
	}
	if from := connect(t, n.pod, "127.0.0.1:8080", guest); from != "10.0.2.1" {
		t.Errorf("pod localhost:8080 reached the guest from %s, want 10.0.2.1", from)
	}
	node := listen(t, n.node, testNodeIP+":9090")
	if from := connect(t, n.guest, testNodeIP+":9090", node); from != testPodIP {
		t.Errorf("guest -> node reached the node from %s, want the pod IP %s", from, testPodIP)
	}
	unlisted := listen(t, n.guest, ":8081")
	conn, err := dialIn(t, n.node, testPodIP+":8081")
	if onlyListed && err == nil {
		conn.Close()
		t.Errorf("node -> pod:8081 connected; only 8080 is forwarded")
	}
	if !onlyListed {
		if err != nil {
			t.Errorf("node -> pod:8081: %v; every port is forwarded", err)
		} else {
			conn.Close()
			acceptFrom(t, unlisted)
		}
	}
}

func TestSetupBridge(t *testing.T) {
	specMAC := net.HardwareAddr{0x02, 0x42, 0, 0, 0, 0x02}
	for _, tt := range []struct {
		name string
		mac  net.HardwareAddr
	}{{name: "guest takes eth0's MAC"}, {name: "spec MAC", mac: specMAC}} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNet(t)
			origMAC := links(t, n.pod)["eth0"].Address
			iface := podIface("default", 0, BindingBridge)
			iface.MAC = tt.mac
			var eth0MAC string
			got := setupTwice(t, n, []Interface{iface}, func() { eth0MAC = links(t, n.pod)["eth0"].Address })

			guestMAC, _ := net.ParseMAC(origMAC)
			if tt.mac != nil {
				guestMAC = tt.mac
			}
			want := []Result{{
				Interface: "default", PodInterface: "eth0",
				Lease: dhcp.Lease{
					ServerInterface: "k6t-eth0", ServerIP: net.IPv4(169, 254, 75, 10).To4(), ClientMAC: guestMAC,
					IP: cidr(t, testPodIP+"/24"), Router: net.ParseIP(testNodeIP).To4(), MTU: testMTU,
					Routes: []dhcp.Route{
						{Dest: cidr(t, "10.96.0.0/12"), Gateway: net.IPv4(10, 244, 7, 254).To4()},
						{Dest: cidr(t, "169.254.1.1/32")},
					},
				},
				MAC:    guestMAC.String(),
				PodIPs: []string{testPodIP},
			}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Setup (-want +got):\n%s", diff)
			}

			l := links(t, n.pod)
			eth0, br := l["eth0"], l["k6t-eth0"]
			if eth0.Master != "k6t-eth0" || len(eth0.ipv4()) != 0 || !eth0.up() {
				t.Errorf("eth0: master %q, addresses %v, flags %v; want k6t-eth0, none, UP", eth0.Master, eth0.ipv4(), eth0.Flags)
			}
			if eth0.Address != eth0MAC {
				t.Errorf("second Setup changed eth0's MAC from %s to %s", eth0MAC, eth0.Address)
			}
			switch {
			case tt.mac == nil && eth0.Address == origMAC:
				t.Errorf("eth0 kept its MAC %s, which the guest takes", origMAC)
			case tt.mac == nil && !isLocalUnicast(eth0.Address):
				t.Errorf("eth0's new MAC %s is not locally administered unicast", eth0.Address)
			case tt.mac != nil && eth0.Address != origMAC:
				t.Errorf("eth0's MAC changed from %s to %s though the guest has its own", origMAC, eth0.Address)
			}
			if br.LinkInfo.InfoKind != "bridge" || br.MTU != testMTU || !br.up() || !cmp.Equal(br.ipv4(), []string{"169.254.75.10/32"}) {
				t.Errorf("k6t-eth0: %s, MTU %d, flags %v, addresses %v; want an UP bridge, MTU %d, 169.254.75.10/32",
					br.LinkInfo.InfoKind, br.MTU, br.Flags, br.ipv4(), testMTU)
			}
			if !strings.HasPrefix(br.IfAlias, recordPrefix) {
				t.Errorf("k6t-eth0 alias = %q, want the pod's record", br.IfAlias)
			}
			checkTap(t, l["tap0"], false)
			if rules := nftRules(t, n.pod); len(rules) != 0 {
				t.Errorf("bridge binding installed NAT rules: %v", rules)
			}
			if routes := run(t, "ip", "-n", n.pod, "-4", "route", "show", "dev", "eth0"); routes != "" {
				t.Errorf("eth0 kept IPv4 routes:\n%s", routes)
			}

			n.addGuest(guestMAC.String(), testPodIP+"/24", testNodeIP)
			guest := listen(t, n.guest, ":8080")
			if from := connect(t, n.node, testPodIP+":8080", guest); from != testNodeIP {
				t.Errorf("node -> guest reached it from %s, want %s", from, testNodeIP)
			}
			node := listen(t, n.node, testNodeIP+":9090")
			if from := connect(t, n.guest, testNodeIP+":9090", node); from != testPodIP {
				t.Errorf("guest -> node reached it from %s, want %s", from, testPodIP)
			}

			// The node's bridge sends the guest's broadcasts back to the
			// pod (hairpin mode, as the CNI bridge plugin sets it): the
			// guest's ARP request for the node comes back in through eth0.
			// k6t-eth0 must not learn the guest's MAC there, or it drops the
			// node's answer and every frame to the guest while the guest
			// stays silent (an e2e failure: a guest's pod IP unanswered).
			n.hairpinNode()
			run(t, "ip", "-n", n.guest, "neigh", "flush", "dev", "eth0")
			arp := exec.Command("ip", "netns", "exec", n.guest, "busybox", "arping", "-c", "1", "-w", "2", "-I", "eth0", testNodeIP)
			if out, err := arp.CombinedOutput(); err != nil {
				t.Errorf("guest's ARP for the node through a hairpin bridge: %v: %s", err, out)
			}
			if fdb := portMACs(t, n.pod, "eth0"); slices.Contains(fdb, guestMAC.String()) {
				t.Errorf("k6t-eth0 learned the guest's MAC %s on eth0 from its own reflected ARP: eth0's entries %v", guestMAC, fdb)
			}
			if from := connect(t, n.node, testPodIP+":8080", guest); from != testNodeIP {
				t.Errorf("node -> guest after the guest's reflected ARP reached it from %q, want %s", from, testNodeIP)
			}
		})
	}
}

// portMACs returns the MACs in the forwarding table of bridge port dev in
// namespace ns (bridge fdb show dev DEV).
func portMACs(t *testing.T, ns, dev string) []string {
	t.Helper()
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := h.NeighList(l.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		t.Fatalf("%s's forwarding table in %s: %v", dev, ns, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.HardwareAddr.String())
	}
	return out
}

// hairpinNode puts the node's end of the pod's veth, gw0, on a bridge with
// the node's address, in hairpin mode: a frame from the pod that the bridge
// floods goes back to the pod too, as on a node whose CNI bridge plugin has
// hairpinMode on.
func (n *testNet) hairpinNode() {
	t := n.t
	t.Helper()
	for _, args := range [][]string{
		{"-n", n.node, "link", "add", "nbr0", "mtu", fmt.Sprint(testMTU), "type", "bridge"},
		{"-n", n.node, "addr", "del", testNodeIP + "/24", "dev", "gw0"},
		{"-n", n.node, "link", "set", "gw0", "master", "nbr0"},
		{"-n", n.node, "link", "set", "gw0", "type", "bridge_slave", "hairpin", "on"},
		{"-n", n.node, "addr", "add", testNodeIP + "/24", "dev", "nbr0"},
		{"-n", n.node, "link", "set", "nbr0", "up"},
	} {
		run(t, "ip", args...)
	}
}

func isLocalUnicast(s string) bool {
	mac, err := net.ParseMAC(s)
	return err == nil && mac[0]&0x02 != 0 && mac[0]&0x01 == 0
}

// Setup names the interface and the step that failed.
func TestSetupErrorNamesInterface(t *testing.T) {
	requireNetAdmin(t)
	ns := uniqueName(t)
	addNamespace(t, ns)
	iface := podIface("default", 0, BindingMasquerade)
	_, err := Setup("/var/run/netns/"+ns, []Interface{iface}, testOpts)
	want := "spec.domain.devices.interfaces[0] (default): reading eth0: no such device"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Setup on a namespace without eth0 = %v, want %q...", err, want)
	}
}

// Setup refuses the caller's own namespace (a launcher on the host network).
func TestSetupRefusesOwnNamespace(t *testing.T) {
	iface := podIface("default", 0, BindingBridge)
	iface.PodInterface = "vmkit-none0" // should the refusal break, touch nothing
	_, err := Setup("/proc/self/ns/net", []Interface{iface}, testOpts)
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("Setup on the agent's own namespace = %v, want a refusal", err)
	}
}

func TestSameNamespace(t *testing.T) {
	requireNetAdmin(t)
	ns := uniqueName(t)
	addNamespace(t, ns)
	for path, want := range map[string]bool{
		"/proc/self/ns/net":    true,
		"/var/run/netns/" + ns: false,
	} {
		got, err := SameNamespace(path)
		if err != nil || got != want {
			t.Errorf("SameNamespace(%s) = %v, %v; want %v", path, got, err, want)
		}
	}
	if _, err := SameNamespace("/nonexistent/ns"); err == nil {
		t.Errorf("SameNamespace of a missing path succeeded")
	}
}

// listen opens a TCP listener in namespace ns; t's cleanup closes it.
func listen(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := inTestNamespace(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialIn connects to addr from namespace ns.
func dialIn(t *testing.T, ns, addr string) (net.Conn, error) {
	t.Helper()
	var conn net.Conn
	err := inTestNamespace(ns, func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, 3*time.Second)
		return err
	})
	return conn, err
}

// connect connects to addr from namespace ns and returns the source address
// the connection arrived from at ln.
func connect(t *testing.T, ns, addr string, ln net.Listener) string {
	t.Helper()
	conn, err := dialIn(t, ns, addr)
	if err != nil {
		t.Errorf("connecting to %s from %s: %v", addr, ns, err)
		return ""
	}
	defer conn.Close()
	return acceptFrom(t, ln)
}

// acceptFrom accepts one connection on ln and returns its source IP.
func acceptFrom(t *testing.T, ln net.Listener) string {
	t.Helper()
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Errorf("accepting on %s: %v", ln.Addr(), err)
		return ""
	}
	defer c.Close()
	return c.RemoteAddr().(*net.TCPAddr).IP.String()
}

func inTestNamespace(name string, f func() error) error {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	defer ns.Close()
	return inNamespace(ns, f)
}

// TestSetupPasst: the passt binding wires nothing in the pod (passt, which
// the launcher runs, does it all), reports the pod's address as the guest's,
// and refuses forwarding every port where the launcher's open-file limit
// cannot hold a socket per port, naming the field.
func TestSetupPasst(t *testing.T) {
	n := newTestNet(t)
	before := links(t, n.pod)
	iface := podIface("default", 0, BindingPasst)
	iface.Ports = []v1.Port{{Port: 22, Protocol: "TCP"}}
	got, err := Setup(n.podPath(), []Interface{iface}, Options{OpenFileLimit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{{Interface: "default", PodInterface: "eth0", Lease: dhcp.Lease{IP: cidr(t, testPodIP+"/24")}, PodIPs: []string{testPodIP}, Passt: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Setup (-want +got):\n%s", diff)
	}
	if after := links(t, n.pod); len(after) != len(before) {
		t.Errorf("passt's Setup changed the pod's links: %v, then %v", before, after)
	}
	if rules := nftRules(t, n.pod); len(rules) != 0 {
		t.Errorf("passt's Setup installed nftables rules: %v", rules)
	}

	// No ports listed: every port, which 1,024 open files cannot hold.
	iface.Ports = nil
	_, err = Setup(n.podPath(), []Interface{iface}, Options{OpenFileLimit: 1024})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "spec.domain.devices.interfaces[0].ports" || !strings.Contains(fe.Message, "may open only 1024") {
		t.Fatalf("Setup with no ports and 1024 open files: %v, want a FieldError on spec.domain.devices.interfaces[0].ports", err)
	}
	// The pod's own ephemeral range counts: with all but 2,000 ports
	// ephemeral, 5,000 files are enough.
	run(t, "ip", "netns", "exec", n.pod, "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=2000 65535")
	if _, err := Setup(n.podPath(), []Interface{iface}, Options{OpenFileLimit: 5000}); err != nil {
		t.Errorf("Setup with no ports, a narrow non-ephemeral range and 5000 open files: %v", err)
	}
}
