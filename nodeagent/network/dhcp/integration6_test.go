package dhcp

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dhcpcdScript prints the variables dhcpcd gives its script when it has a
// DHCPv6 lease, and the router advertisement's, one "dhcp-env" line each.
const dhcpcdScript = `#!/bin/sh
case "$reason" in BOUND6|REBOOT6|ROUTERADVERT) ;; *) exit 0 ;; esac
env | grep -E '^(new_dhcp6_|nd1_)' | sed 's/^/dhcp-env /'
echo "dhcp-env reason=$reason"
`

// TestServe6Dhcpcd runs Serve6 and Advertise in one network namespace as
// virt-launcher and the node agent do in a pod's, and dhcpcd (a guest's DHCPv6 and router-advertisement
// client) in another, joined by a veth pair: dhcpcd must take the address,
// the name servers and search domains, and install a default route
// through the server's link-local address and the on-link prefix.
func TestServe6Dhcpcd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs dhcpcd against Serve6 across network namespaces")
	}
	requireClient(t, "dhcpcd", "dhcpcd-base")
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	serverNS, clientNS := "vmkit-dhcp6-srv-"+suffix, "vmkit-dhcp6-vm-"+suffix
	lease := Lease6{
		ServerInterface: "k6t-eth0",
		IP:              net.ParseIP("fd10:0:2::2"),
		PrefixLen:       120,
		DNS:             []net.IP{net.ParseIP("fd00:10:96::a")},
		SearchDomains:   []string{"default.svc.cluster.local", "cluster.local"},
		MTU:             1400,
	}
	t.Cleanup(func() {
		for _, ns := range []string{serverNS, clientNS} {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	ip(t, "netns", "add", serverNS)
	ip(t, "netns", "add", clientNS)
	ip(t, "-n", serverNS, "link", "add", lease.ServerInterface, "type", "veth", "peer", "name", "eth0", "netns", clientNS)
	ip(t, "-n", serverNS, "addr", "add", "fd10:0:2::1/120", "dev", lease.ServerInterface, "nodad")
	for _, dev := range []struct{ ns, name string }{{serverNS, "lo"}, {serverNS, lease.ServerInterface}, {clientNS, "lo"}, {clientNS, "eth0"}} {
		ip(t, "-n", dev.ns, "link", "set", dev.name, "up")
	}

	ctx, cancel := context.WithCancel(context.Background())
	served := goInNetns(serverNS, func() error { return Serve6(ctx, lease) })
	advertised := goInNetns(serverNS, func() error { return Advertise(ctx, lease) })
	t.Cleanup(func() {
		cancel()
		for name, done := range map[string]<-chan error{"Serve6": served, "Advertise": advertised} {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s did not return within 5s of its context ending", name)
			}
		}
	})

	dir := t.TempDir()
	script := filepath.Join(dir, "dhcpcd.script")
	if err := os.WriteFile(script, []byte(dhcpcdScript), 0o755); err != nil {
		t.Fatal(err)
	}
	// dhcpcd as a guest runs it, for IPv6 only, in the foreground, on eth0,
	// until the address is bound (-1) or for 20 s at most. Its lease
	// database and run directory are the test's (bind mounts in a mount
	// namespace of its own), so the host's are left alone.
	state, run := filepath.Join(dir, "lib"), filepath.Join(dir, "run")
	for _, d := range []string{state, run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer dcancel()
	cmd := exec.CommandContext(dctx, "ip", "netns", "exec", clientNS, "unshare", "--mount", "sh", "-c",
		`mkdir -p /var/lib/dhcpcd /run/dhcpcd && mount --bind "$1" /var/lib/dhcpcd && mount --bind "$2" /run/dhcpcd && shift 2 && exec dhcpcd "$@"`,
		"sh", state, run, "-6", "-1", "-B", "-d", "-c", script, "-f", "/dev/null", "-w", "eth0")
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("dhcpcd: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}

	addrs, _ := exec.Command("ip", "-n", clientNS, "-6", "addr", "show", "dev", "eth0").CombinedOutput()
	routes, _ := exec.Command("ip", "-n", clientNS, "-6", "route").CombinedOutput()
	t.Logf("addresses:\n%s\nroutes:\n%s", addrs, routes)
	if !strings.Contains(string(addrs), "fd10:0:2::2/") {
		t.Errorf("the client has no fd10:0:2::2")
	}
	if !strings.Contains(string(routes), "default via fe80::") {
		t.Errorf("the client has no default route through the server's link-local address")
	}
	if !strings.Contains(string(routes), "fd10:0:2::/120") {
		t.Errorf("the client has no on-link route to fd10:0:2::/120")
	}
	out := stdout.String()
	for _, want := range []string{"new_dhcp6_name_servers=fd00:10:96::a", "new_dhcp6_domain_search=default.svc.cluster.local cluster.local"} {
		if !strings.Contains(out, "dhcp-env "+want) {
			t.Errorf("dhcpcd's script did not get %s", want)
		}
	}
}
