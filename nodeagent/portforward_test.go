package nodeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/websocket"

	"github.com/vmkit/vmkit/nodeagent/network"
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

// The pod network interface's address is dialed, not another's: the
// server listens on 127.0.0.1 only.
func podNetworkStatus(vmi *v1.VirtualMachineInstance) {
	vmi.Spec.Networks = []v1.Network{
		{Name: "storage", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "storage"}}},
		{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}},
	}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{
		{Name: "storage", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
		{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
	}
	vmi.Status.Interfaces = []v1.VirtualMachineInstanceNetworkInterface{
		{Name: "storage", IP: "127.0.0.2"},
		{Name: "default", IP: "127.0.0.1"},
	}
}

// TestPortForward: the WebSocket carries an HTTP exchange with a TCP server
// at the guest's address, and UDP datagrams to a UDP server; bad ports and
// protocols, a VMI without an address, a refused connection and a VMI on
// another node get their status codes.
func TestPortForward(t *testing.T) {
	f := newRESTFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "guest answers %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	f.update(podNetworkStatus)

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
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
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
		{"no address", "vm1", port, func(vmi *v1.VirtualMachineInstance) {
			vmi.Status.Interfaces = []v1.VirtualMachineInstanceNetworkInterface{{Name: "default"}}
		},
			http.StatusConflict, errNoIP},
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
}

// A masquerade VMI whose launcher shares the agent's network namespace (as
// here: the launcher runs in the test) is dialed at its status address.
func TestPortForwardMasqueradeSameNamespace(t *testing.T) {
	f := newRESTFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "guest") }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	f.update(func(vmi *v1.VirtualMachineInstance) {
		podNetworkStatus(vmi)
		vmi.Spec.Domain.Devices.Interfaces[1].InterfaceBindingMethod = v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
	})
	ws, err := f.portForward("vm1", port)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := io.WriteString(ws, "GET / HTTP/1.1\r\nHost: guest\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(ws), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "guest" {
		t.Errorf("answer %q, want the server's", body)
	}
}

func TestGuestIP(t *testing.T) {
	pod := []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
	for _, tc := range []struct {
		name   string
		nets   []v1.Network
		ifaces []v1.VirtualMachineInstanceNetworkInterface
		want   string
	}{
		{"the pod network's", pod, []v1.VirtualMachineInstanceNetworkInterface{{Name: "other", IP: "10.1.0.5"}, {Name: "default", IP: "10.244.0.7"}}, "10.244.0.7"},
		{"the pod network has none yet", pod, []v1.VirtualMachineInstanceNetworkInterface{{Name: "default"}, {Name: "other", IP: "10.1.0.5"}}, "10.1.0.5"},
		{"no pod network", nil, []v1.VirtualMachineInstanceNetworkInterface{{InterfaceName: "eth0"}, {InterfaceName: "eth1", IP: "fd00::5"}}, "fd00::5"},
		{"none", pod, []v1.VirtualMachineInstanceNetworkInterface{{Name: "default"}}, ""},
	} {
		vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Networks: tc.nets}, Status: v1.VirtualMachineInstanceStatus{Interfaces: tc.ifaces}}
		if got := guestIP(vmi); got != tc.want {
			t.Errorf("%s: guestIP = %q, want %q", tc.name, got, tc.want)
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
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a network namespace: run it as root (sudo go test -run TestDialInNamespace ./nodeagent/)")
	}
	// A namespace with lo up and a server on 127.0.0.1 in it, made on a
	// thread of its own that then returns to the test's namespace.
	type made struct {
		ns  netns.NsHandle
		ln  net.Listener
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
		var ln net.Listener
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err == nil {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if serr := netns.Set(orig); serr != nil {
			ch <- made{err: serr} // the thread stays locked and ends with the goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- made{ns, ln, err}
	}()
	m := <-ch
	if m.err != nil {
		t.Fatalf("making a network namespace: %v", m.err)
	}
	t.Cleanup(func() { m.ns.Close() })
	t.Cleanup(func() { m.ln.Close() })
	go func() {
		for {
			c, err := m.ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "inside")
			c.Close()
		}
	}()
	addr := m.ln.Addr().String()
	nsPath := fmt.Sprintf("/proc/self/fd/%d", int(m.ns))

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
