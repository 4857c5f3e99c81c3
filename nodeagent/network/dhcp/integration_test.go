package dhcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// udhcpcScript prints, when udhcpc has a lease, the variables udhcpc gives
// its script, one "dhcp-env name=value" line each.
const udhcpcScript = `#!/bin/sh
[ "$1" = bound ] || exit 0
for v in interface ip subnet mask broadcast router dns domain search hostname mtu lease serverid staticroutes ntpsrv tftp bootfile opt240; do
	eval "echo \"dhcp-env $v=\$$v\""
done
`

// TestServeUdhcpc runs Serve in one network namespace the way virt-launcher
// does in a pod's, and busybox's udhcpc in another as the guest, the two
// joined by a veth pair: the client must configure what the lease says, and
// a renewal from its new address must get a unicast ACK.
func TestServeUdhcpc(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs busybox udhcpc against Serve across network namespaces")
	}
	requireClient(t, "busybox", "busybox")

	suffix := fmt.Sprintf("%08x", rand.Uint32())
	serverNS, clientNS := "vmkit-dhcp-srv-"+suffix, "vmkit-dhcp-vm-"+suffix
	lease := testLease()
	// A VMI's dhcpOptions (KubeVirt's): boot file, TFTP server, NTP servers and a private option.
	lease.BootFileName, lease.TFTPServerName = "pxelinux.0", "tftp.example"
	lease.NTPServers = []net.IP{net.IPv4(10, 96, 0, 20), net.IPv4(10, 96, 0, 21)}
	lease.PrivateOptions = []PrivateOption{{Code: 240, Value: []byte("site")}}
	setupLink(t, serverNS, clientNS, lease)

	ctx, cancel := context.WithCancel(context.Background())
	served := goInNetns(serverNS, func() error { return Serve(ctx, lease) })
	t.Cleanup(func() { // runs before setupLink's cleanup deletes the namespaces
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5s of its context ending")
		}
	})

	t.Run("udhcpc gets the lease", func(t *testing.T) {
		got := runUdhcpc(t, clientNS, "eth0")
		want := map[string]string{
			"interface":    "eth0",
			"ip":           "10.0.2.2",
			"subnet":       "255.255.255.0",
			"mask":         "24",
			"broadcast":    "10.0.2.255",
			"router":       "10.0.2.1",
			"dns":          "10.96.0.10 10.96.0.11",
			"domain":       "",
			"search":       "default.svc.cluster.local svc.cluster.local cluster.local",
			"hostname":     "vm1",
			"mtu":          "1450",
			"lease":        "86400",
			"serverid":     "10.0.2.1",
			"staticroutes": "10.10.0.0/16 10.0.2.254 0.0.0.0/0 10.0.2.1",
			"ntpsrv":       "10.96.0.20 10.96.0.21",
			"tftp":         "tftp.example",
			"bootfile":     "pxelinux.0",
			"opt240":       "73697465", // udhcpc gives options it does not know in hex
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("udhcpc's lease (-want +got):\n%s", diff)
		}
	})

	t.Run("a renewal from the bound address gets a unicast ACK", func(t *testing.T) {
		ip(t, "-n", clientNS, "addr", "add", "10.0.2.2/24", "dev", "eth0")
		var ack *dhcpv4.DHCPv4
		err := <-goInNetns(clientNS, func() error {
			var err error
			ack, err = renew(lease.IP.IP, lease.ServerIP)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if ack.MessageType() != dhcpv4.MessageTypeAck || !ack.YourIPAddr.Equal(lease.IP.IP) {
			t.Errorf("renewal answered with %v, want an ACK for 10.0.2.2", ack)
		}
	})
}

// requireClient fails t unless the DHCP client (from Debian package pkg),
// ip(8) and root, which the namespaces need, are there.
func requireClient(t *testing.T, client, pkg string) {
	t.Helper()
	for tool, install := range map[string]string{client: "apt-get update && apt-get install -y " + pkg, "ip": "apt-get update && apt-get install -y iproute2"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required to test the DHCP server with a real client: install it with `%s`", tool, install)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run the test as root")
	}
}

// setupLink creates the two namespaces and a veth pair between them: the
// server's end is lease.ServerInterface with lease.ServerIP/24, the client's
// is eth0 with lease.ClientMAC. Cleanup deletes the link and the
// namespaces, also after a failure.
func setupLink(t *testing.T, serverNS, clientNS string, lease Lease) {
	t.Cleanup(func() {
		exec.Command("ip", "-n", serverNS, "link", "del", lease.ServerInterface).Run()
		for _, ns := range []string{serverNS, clientNS} {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		}
	})
	ip(t, "netns", "add", serverNS)
	ip(t, "netns", "add", clientNS)
	ip(t, "-n", serverNS, "link", "add", lease.ServerInterface, "type", "veth", "peer", "name", "eth0", "netns", clientNS)
	ip(t, "-n", clientNS, "link", "set", "eth0", "address", lease.ClientMAC.String())
	ip(t, "-n", serverNS, "addr", "add", lease.ServerIP.String()+"/24", "dev", lease.ServerInterface)
	for _, dev := range []struct{ ns, name string }{{serverNS, "lo"}, {serverNS, lease.ServerInterface}, {clientNS, "lo"}, {clientNS, "eth0"}} {
		ip(t, "-n", dev.ns, "link", "set", dev.name, "up")
	}
}

// ip runs ip(8) and fails the test if it fails.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// goInNetns runs fn on a thread of its own in the named network namespace
// and reports its result. The thread stays locked and ends with fn: a
// thread that joined another namespace must not run other goroutines.
// Sockets fn opens stay in the namespace whichever thread uses them later.
func goInNetns(name string, fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime ends the thread with this goroutine
		fd, err := unix.Open(filepath.Join("/var/run/netns", name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("opening network namespace %s: %w", name, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- fmt.Errorf("entering network namespace %s: %w", name, err)
			return
		}
		done <- fn()
	}()
	return done
}

// runUdhcpc runs busybox udhcpc once on dev in ns (five discovers a second
// apart at most) and returns the variables its script received.
func runUdhcpc(t *testing.T, ns, dev string) map[string]string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "udhcpc.script")
	if err := os.WriteFile(script, []byte(udhcpcScript), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "busybox", "udhcpc", "-i", dev, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("udhcpc got no lease: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	env := make(map[string]string)
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if kv, ok := strings.CutPrefix(sc.Text(), "dhcp-env "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = strings.TrimSpace(v)
		}
	}
	if len(env) == 0 {
		t.Fatalf("udhcpc's script printed nothing; stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	}
	return env
}

// renew sends a renewing REQUEST (ciaddr set, unicast to the server) from a
// UDP socket bound to ip:68 and waits a second for the answer. The socket
// receives no broadcasts, so only a unicast answer arrives.
func renew(ip, server net.IP) (*dhcpv4.DHCPv4, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: ip, Port: dhcpv4.ClientPort})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(guestMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithClientIP(ip))
	if err != nil {
		return nil, err
	}
	if _, err := conn.WriteToUDP(req.ToBytes(), &net.UDPAddr{IP: server, Port: dhcpv4.ServerPort}); err != nil {
		return nil, fmt.Errorf("sending the renewal: %w", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return nil, err
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			return nil, fmt.Errorf("no unicast answer to the renewal: %w", err)
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || m.TransactionID != req.TransactionID {
			continue
		}
		if !from.IP.Equal(server) {
			return nil, fmt.Errorf("the answer came from %v, want %v", from, server)
		}
		return m, nil
	}
}
