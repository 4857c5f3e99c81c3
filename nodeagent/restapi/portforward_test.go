package restapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/websocket"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// portForward opens a port-forward WebSocket to the VMI's guest.
func (f *restFixture) portForward(vmi, path string) (*websocket.Conn, error) {
	url := strings.Replace(f.url, "http://", "ws://", 1) + "/v1/namespaces/ns/virtualmachineinstances/" + vmi + "/portforward/" + path
	ws, err := websocket.Dial(url, "", "http://localhost/")
	if err != nil {
		return nil, err
	}
	ws.PayloadType = websocket.BinaryFrame
	_ = ws.SetDeadline(time.Now().Add(10 * time.Second))
	return ws, nil
}

// masqueradeVMI gives vm1 a masquerade pod network interface and, in its
// status, addresses the agent must not dial: what a user could write at
// creation or the guest's agent report (127.0.0.1 is the node's loopback,
// where hostService listens).
func masqueradeVMI(vmi *v1.VirtualMachineInstance) {
	vmi.Spec.Networks = []v1.Network{
		{Name: "storage", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "storage"}}},
		{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}},
	}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{
		{Name: "storage", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
		{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
	}
	vmi.Status.Interfaces = []v1.VirtualMachineInstanceNetworkInterface{
		{Name: "storage", IP: "127.0.0.2"},
		{Name: "default", IP: "127.0.0.1"},
	}
}

// testNetNS is a network namespace of the test's own standing in for a
// launcher pod's: lo up with masqueradeGuestIP on it, where the guest
// answers. inside runs on a thread in the namespace (to listen there).
func testNetNS(t *testing.T, inside func() error) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a network namespace: run it as root (sudo go test ./nodeagent/restapi/)")
	}
	type made struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- made{err: err}
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			ch <- made{err: err}
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err == nil {
			err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(masqueradeGuestIP), Mask: net.CIDRMask(32, 32)}})
		}
		if err == nil && inside != nil {
			err = inside()
		}
		if serr := netns.Set(orig); serr != nil {
			ch <- made{err: serr} // the thread stays locked and ends with the goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- made{ns, err}
	}()
	m := <-ch
	if m.err != nil {
		t.Fatalf("making a network namespace: %v", m.err)
	}
	t.Cleanup(func() { m.ns.Close() })
	return fmt.Sprintf("/proc/self/fd/%d", int(m.ns))
}

// hostService listens on 127.0.0.1 in the test's (the agent's) own
// namespace and counts the connections it gets: port-forward must never
// reach it.
func hostService(t *testing.T) (port string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_, _ = io.WriteString(c, "HOST-SERVICE-NOT-THE-GUEST\n")
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, conns
}

// TestPortForward: the WebSocket carries an HTTP exchange with a TCP server
// at the guest's address inside the launcher's network namespace, and UDP
// datagrams to a UDP server there; the addresses in status are never
// dialed; bad ports and protocols, a VMI without a pod network, a refused
// connection and a VMI on another node get their status codes.
func TestPortForward(t *testing.T) {
	f := newRESTFixture(t)
	port, hostConns := hostService(t)
	var tcp net.Listener
	var udp net.PacketConn
	nsPath := testNetNS(t, func() error {
		var err error
		// The same port as the node's service: only the namespace differs.
		if tcp, err = net.Listen("tcp", net.JoinHostPort(masqueradeGuestIP, port)); err != nil {
			return err
		}
		udp, err = net.ListenPacket("udp", masqueradeGuestIP+":0")
		return err
	})
	t.Cleanup(func() { tcp.Close(); udp.Close() })
	go func() {
		_ = http.Serve(tcp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "guest answers %s", r.URL.Path) }))
	}()
	f.s.netNS = func(context.Context, *client.Client) (int, string, error) { return os.Getpid(), nsPath, nil }
	f.update(masqueradeVMI)

	for _, path := range []string{port, port + "/tcp"} {
		ws, err := f.portForward("vm1", path)
		if err != nil {
			t.Fatalf("portforward/%s: %v", path, err)
		}
		if _, err := io.WriteString(ws, "GET /hello HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(ws), nil)
		if err != nil {
			t.Fatalf("portforward/%s: reading the response: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "guest answers /hello" {
			t.Errorf("portforward/%s: %s %q, want the server's answer", path, resp.Status, body)
		}
		ws.Close()
	}

	// UDP: one message, one datagram, both ways.
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = udp.WriteTo([]byte("echo "+string(buf[:n])), from)
		}
	}()
	ws, err := f.portForward("vm1", strconv.Itoa(udp.LocalAddr().(*net.UDPAddr).Port)+"/udp")
	if err != nil {
		t.Fatalf("portforward udp: %v", err)
	}
	for _, msg := range []string{"one", "two"} {
		if err := websocket.Message.Send(ws, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := websocket.Message.Receive(ws, &got); err != nil || string(got) != "echo "+msg {
			t.Errorf("udp datagram %q: got %q, %v; want %q", msg, got, err, "echo "+msg)
		}
	}
	ws.Close()

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	for _, tc := range []struct {
		name, vmi, path string
		setup           func(*v1.VirtualMachineInstance)
		wantCode        int
		wantMsg         string
	}{
		{"port 0", "vm1", "0", nil, http.StatusBadRequest, `invalid port "0": want 1-65535`},
		{"port 65536", "vm1", "65536", nil, http.StatusBadRequest, "want 1-65535"},
		{"a name", "vm1", "ssh", nil, http.StatusBadRequest, "want 1-65535"},
		{"sctp", "vm1", port + "/sctp", nil, http.StatusBadRequest, `unsupported protocol "sctp"`},
		{"nothing listens", "vm1", closedPort, nil, http.StatusBadGateway, "connection refused"},
		{"another node", "elsewhere", port, nil, http.StatusNotFound, "does not run on node node01"},
		// The SSRF of the security review (N2): a VMI without a pod
		// interface whose status lists the node's loopback.
		{"no pod network, loopback in status", "vm1", port, func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Networks, vmi.Spec.Domain.Devices.Interfaces = nil, nil
		}, http.StatusConflict, errNoIP},
		{"no pod network, a hostname in status", "vm1", port, func(vmi *v1.VirtualMachineInstance) {
			vmi.Status.Interfaces = []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "localhost"}}
		}, http.StatusConflict, errNoIP},
	} {
		if tc.setup != nil {
			f.update(tc.setup)
		}
		code, body := f.do("GET", tc.vmi, "portforward/"+tc.path, "")
		var e apiError
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.wantCode || e.Code != code || !strings.Contains(e.Message, tc.wantMsg) {
			t.Errorf("%s: %d %s, want %d %q", tc.name, code, body, tc.wantCode, tc.wantMsg)
		}
	}
	if n := hostConns.Load(); n != 0 {
		t.Errorf("the node's own service got %d connections through port-forward", n)
	}
}

// A pod network interface whose launcher shares the agent's network
// namespace (as here: the launcher runs in the test), whatever its
// binding, has no address the agent wired: the status address is not
// dialed.
func TestPortForwardRefusesStatusAddresses(t *testing.T) {
	f := newRESTFixture(t)
	port, hostConns := hostService(t)
	for _, binding := range []v1.InterfaceBindingMethod{{Masquerade: &v1.InterfaceMasquerade{}}, {Bridge: &v1.InterfaceBridge{}}} {
		f.update(func(vmi *v1.VirtualMachineInstance) {
			masqueradeVMI(vmi)
			vmi.Spec.Domain.Devices.Interfaces[1].InterfaceBindingMethod = binding
		})
		code, body := f.do("GET", "vm1", "portforward/"+port, "")
		if code != http.StatusConflict || !strings.Contains(body, errNoIP) {
			t.Errorf("%+v: %d %s, want 409 %q", binding, code, body, errNoIP)
		}
	}
	// A bridge interface the agent wired is dialed at the pod IP it took,
	// never at loopback even there.
	f.b.setWired(types.UID("0d4a0f4e-1111-4222-8333-944455556666"), []network.Result{{Interface: "default", Lease: dhcp.Lease{IP: net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)}}}})
	f.s.netNS = func(context.Context, *client.Client) (int, string, error) {
		return os.Getpid(), "/proc/self/ns/net", nil
	}
	code, body := f.do("GET", "vm1", "portforward/"+port, "")
	if code != http.StatusConflict || !strings.Contains(body, "is not a guest's address") {
		t.Errorf("wired loopback: %d %s, want 409", code, body)
	}
	if n := hostConns.Load(); n != 0 {
		t.Errorf("the node's own service got %d connections through port-forward", n)
	}
}

func TestCheckDialable(t *testing.T) {
	for addr, ok := range map[string]bool{
		"10.244.0.7": true, "fd00:10:244::7": true, "192.0.2.1": true,
		"127.0.0.1": false, "::1": false, "0.0.0.0": false, "::": false, "169.254.169.254": false,
		"fe80::1": false, "224.0.0.1": false, "ff02::1": false, "255.255.255.255": false,
		"localhost": false, "": false, "10.0.0.1:22": false,
	} {
		if err := checkDialable(addr); (err == nil) != ok {
			t.Errorf("checkDialable(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

// The masquerade guest address the agent dials is the one
// nodeagent/network's NAT sends the pod's traffic to.
func TestMasqueradeGuestIP(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
	plan, err := network.Plan(vmi)
	if err != nil || len(plan) != 1 {
		t.Fatalf("Plan: %+v, %v", plan, err)
	}
	if rules := network.Ruleset(plan[0]); !strings.Contains(rules, "dnat to "+masqueradeGuestIP) {
		t.Errorf("the masquerade rule set does not forward to %s:\n%s", masqueradeGuestIP, rules)
	}
}

// dialInNamespace reaches a server that listens only inside another
// network namespace, which a dial from the test's own cannot. It needs
// root (CAP_SYS_ADMIN, to create and enter the namespace).
func TestDialInNamespace(t *testing.T) {
	var ln net.Listener
	nsPath := testNetNS(t, func() (err error) {
		ln, err = net.Listen("tcp", masqueradeGuestIP+":0")
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "inside")
			c.Close()
		}
	}()
	addr := ln.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := dialInNamespace(ctx, nsPath, "tcp", addr)
	if err != nil {
		t.Fatalf("dialInNamespace: %v", err)
	}
	got, _ := io.ReadAll(conn)
	conn.Close()
	if string(got) != "inside" {
		t.Errorf("read %q through the namespace, want %q", got, "inside")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s answers in the test's own namespace too: the test proves nothing", addr)
	}
	if _, err := dialInNamespace(ctx, "/proc/self/fd/999999", "tcp", addr); err == nil {
		t.Error("dialInNamespace of a missing namespace: no error")
	}
}
