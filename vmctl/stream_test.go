package vmctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestStream opens each stream subresource through Subresources.Stream and
// checks the path, the subprotocol and credentials the server saw, and
// that bytes go both ways.
func TestStream(t *testing.T) {
	for sub, path := range map[string]string{
		"console":                  prefix + "ns1/virtualmachineinstances/vmi1/console",
		"vnc":                      prefix + "ns1/virtualmachineinstances/vmi1/vnc",
		PortForwardPath(22, "tcp"): prefix + "ns1/virtualmachineinstances/vmi1/portforward/22",
		PortForwardPath(53, "UDP"): prefix + "ns1/virtualmachineinstances/vmi1/portforward/53/udp",
	} {
		t.Run(sub, func(t *testing.T) {
			api := newFakeAPI(t)
			s, err := NewSubresources(api.restConfig())
			if err != nil {
				t.Fatal(err)
			}
			conn, err := s.Stream(context.Background(), "ns1", "vmi1", sub)
			if err != nil {
				t.Fatalf("Stream(%q): %v", sub, err)
			}
			defer func() { _ = conn.Close() }()
			for _, msg := range []string{"hello", strings.Repeat("x", 100000)} {
				if _, err := conn.Write([]byte(msg)); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(conn, got); err != nil {
					t.Fatal(err)
				}
				if string(got) != msg {
					t.Fatalf("echo of %d bytes came back different", len(msg))
				}
			}
			r := api.recorded()[0]
			if r.Method != "GET" || r.Path != path {
				t.Errorf("request %s %s, want GET %s", r.Method, r.Path, path)
			}
			if d := cmp.Diff([]string{PlainStreamProtocol}, r.Subprotocols); d != "" {
				t.Errorf("offered subprotocols (-want +got):\n%s", d)
			}
			if r.Auth != "Bearer "+testToken {
				t.Errorf("Authorization %q, want the bearer token", r.Auth)
			}
		})
	}
}

// TestStreamSkipsTextAndEndsWithEOF: only binary messages carry bytes (as
// KubeVirt's reader), and the server's normal close reads as io.EOF.
func TestStreamSkipsTextAndEndsWithEOF(t *testing.T) {
	api := newFakeAPI(t)
	api.refuse = func(w http.ResponseWriter, r *http.Request) bool {
		up := websocket.Upgrader{Subprotocols: []string{PlainStreamProtocol}}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return true
		}
		_ = ws.WriteMessage(websocket.TextMessage, []byte("ignored"))
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("one"))
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("two"))
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		_ = ws.Close()
		return true
	}
	s, _ := NewSubresources(api.restConfig())
	conn, err := s.Stream(context.Background(), "ns1", "vmi1", "console")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("ReadAll: %v, want the close to end the stream cleanly", err)
	}
	if string(got) != "onetwo" {
		t.Errorf("read %q, want %q", got, "onetwo")
	}
}

// TestStreamRefused: a refused upgrade returns the server's Status, with
// its code.
func TestStreamRefused(t *testing.T) {
	api := newFakeAPI(t)
	api.refuse = func(w http.ResponseWriter, _ *http.Request) bool {
		answerJSON(http.StatusBadRequest, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"VMI is not running","reason":"BadRequest","code":400}`)(w, nil)
		return true
	}
	s, _ := NewSubresources(api.restConfig())
	_, err := s.Stream(context.Background(), "ns1", "vmi1", "vnc")
	if !apierrors.IsBadRequest(err) || err.Error() != "VMI is not running" {
		t.Fatalf("Stream: error %v, want the server's 400 VMI is not running", err)
	}
}

// TestStreamNeedsThePlainSubprotocol: a server that does not speak
// plain.kubevirt.io is refused.
func TestStreamNeedsThePlainSubprotocol(t *testing.T) {
	api := newFakeAPI(t)
	api.upgrader = &websocket.Upgrader{}
	s, _ := NewSubresources(api.restConfig())
	_, err := s.Stream(context.Background(), "ns1", "vmi1", "console")
	if err == nil || !strings.Contains(err.Error(), `the server chose subprotocol "", want "plain.kubevirt.io"`) {
		t.Fatalf("Stream: error %v, want a subprotocol error", err)
	}
	if _, err := s.Stream(context.Background(), "ns1", "vmi1", "../../pods/x/exec"); err == nil {
		t.Error("Stream accepted a subresource climbing out of the VMI")
	}
}

// TestSubresourcesClient checks the client methods the CLI does not use.
func TestSubresourcesClient(t *testing.T) {
	api := newFakeAPI(t)
	s, err := NewSubresources(api.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Freeze(ctx, "ns1", "vmi1", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Unfreeze(ctx, "ns1", "vmi1"); err != nil {
		t.Fatal(err)
	}
	got := api.recorded()
	want := []request{
		{Method: "PUT", Path: prefix + "ns1/virtualmachineinstances/vmi1/freeze", Body: `{"unfreezeTimeout":"5m0s"}`, Auth: "Bearer " + testToken, ContentType: "application/json"},
		{Method: "PUT", Path: prefix + "ns1/virtualmachineinstances/vmi1/unfreeze", Auth: "Bearer " + testToken},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	if err := s.Start(ctx, "ns1", "..", v1.StartOptions{}); err == nil || len(api.recorded()) != 2 {
		t.Errorf("Start of VM \"..\": %v, want an error and no request", err)
	}
	if _, err := NewSubresources(nil); err == nil {
		t.Error("NewSubresources(nil) succeeded")
	}
}

var forwardingLine = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)(/udp)?`)

// forwardedPorts waits for n "Forwarding from" lines and returns the
// local ports.
func forwardedPorts(t *testing.T, out *syncBuffer, n int) []int {
	t.Helper()
	var ports []int
	waitFor(t, "the forwarding lines", func() bool {
		m := forwardingLine.FindAllStringSubmatch(out.String(), -1)
		if len(m) < n {
			return false
		}
		ports = ports[:0]
		for _, l := range m {
			p, _ := strconv.Atoi(l[1])
			ports = append(ports, p)
		}
		return true
	})
	return ports
}

// TestPortForwardTCP: local TCP connections are each joined to a new
// portforward stream of the right port.
func TestPortForwardTCP(t *testing.T) {
	api := newFakeAPI(t)
	out, errOut, stop := api.background(Options{}, "port-forward", "vmi/vmi1/ns2", ":80", "0:22")
	ports := forwardedPorts(t, out, 2)
	for i, p := range ports {
		for j := 0; j < 2; j++ {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatal(err)
			}
			msg := "ping " + strconv.Itoa(i) + strconv.Itoa(j)
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("reading the echo through local port %d: %v (stderr %q)", p, err, errOut.String())
			}
			if string(got) != msg {
				t.Errorf("echo %q, want %q", got, msg)
			}
			_ = c.Close()
		}
	}
	if err := stop(); err != nil {
		t.Errorf("port-forward ended with %v after an interrupt, want nil", err)
	}
	var paths []string
	for _, r := range api.recorded() {
		paths = append(paths, r.Path)
	}
	want := []string{
		prefix + "ns2/virtualmachineinstances/vmi1/portforward/80", prefix + "ns2/virtualmachineinstances/vmi1/portforward/80",
		prefix + "ns2/virtualmachineinstances/vmi1/portforward/22", prefix + "ns2/virtualmachineinstances/vmi1/portforward/22",
	}
	if d := cmp.Diff(want, paths); d != "" {
		t.Errorf("stream paths (-want +got):\n%s", d)
	}
}

// TestPortForwardUDP: datagrams travel as messages of a portforward/N/udp
// stream, one stream per local client.
func TestPortForwardUDP(t *testing.T) {
	api := newFakeAPI(t)
	out, _, stop := api.background(Options{}, "port-forward", "vm/vm1", "udp/:53")
	port := forwardedPorts(t, out, 1)[0]
	c, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for _, msg := range []string{"query one", "query two"} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) != msg {
			t.Errorf("datagram %q, want %q", buf[:n], msg)
		}
	}
	_ = stop()
	reqs := api.recorded()
	if len(reqs) != 1 || reqs[0].Path != prefix+"ns1/virtualmachineinstances/vm1/portforward/53/udp" {
		t.Errorf("requests %+v, want one stream to the VM's instance's portforward/53/udp", reqs)
	}
}

// TestPortForwardStdio joins standard input and output to the stream, for
// ssh's ProxyCommand: nothing else may reach standard output.
func TestPortForwardStdio(t *testing.T) {
	api := newFakeAPI(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errOut bytes.Buffer
	cmd := NewCommand(Options{Name: "vmctl", Streams: streams(inR, outW, &errOut)})
	cmd.SetArgs([]string{"--kubeconfig", api.kubeconfig, "port-forward", "--stdio=true", "vmi/vmi1.ns3", "22"})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()

	if _, err := inW.Write([]byte("SSH-2.0-test\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || line != "SSH-2.0-test\r\n" {
		t.Fatalf("standard output %q (%v), want the echo and nothing else", line, err)
	}
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("port-forward --stdio ended with %v when stdin closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("port-forward --stdio did not end when stdin closed")
	}
	if p := api.recorded()[0].Path; p != prefix+"ns3/virtualmachineinstances/vmi1/portforward/22" {
		t.Errorf("stream path %s, want ns3's vmi1 port 22", p)
	}
}

// TestVNCProxyOnly prints the port as JSON, like virtctl, and gives every
// local connection its own VNC stream.
func TestVNCProxyOnly(t *testing.T) {
	api := newFakeAPI(t)
	out, _, stop := api.background(Options{}, "vnc", "vmi1", "--proxy-only")
	var port int
	waitFor(t, "the port JSON", func() bool { return strings.HasSuffix(out.String(), "\n") })
	var doc map[string]int
	if err := json.Unmarshal([]byte(out.String()), &doc); err != nil || len(doc) != 1 || doc["port"] == 0 {
		t.Fatalf("output %q, want {\"port\":N}", out.String())
	}
	port = doc["port"]
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("RFB 003.008\n")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 12)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "RFB 003.008\n" {
			t.Fatalf("connection %d: read %q (%v)", i, got, err)
		}
		_ = c.Close()
	}
	if err := stop(); err != nil {
		t.Errorf("vnc --proxy-only ended with %v after an interrupt", err)
	}
	if n := api.streamCount(); n != 2 {
		t.Errorf("%d VNC streams, want one per connection (2)", n)
	}
	for _, r := range api.recorded() {
		if r.Path != prefix+"ns1/virtualmachineinstances/vmi1/vnc" {
			t.Errorf("stream path %s, want vmi1's vnc", r.Path)
		}
	}
}

// TestConsole: what the user types reaches the console and the console's
// output reaches the user, until Ctrl+].
func TestConsole(t *testing.T) {
	api := newFakeAPI(t)
	// The first attempt finds the VMI not running yet (400): console
	// retries.
	refused := false
	api.refuse = func(w http.ResponseWriter, _ *http.Request) bool {
		if refused {
			return false
		}
		refused = true
		answerJSON(http.StatusBadRequest, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"VMI is not running","reason":"BadRequest","code":400}`)(w, nil)
		return true
	}
	inR, inW := io.Pipe()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	cmd := NewCommand(Options{Name: "vmctl", Streams: streams(inR, out, errOut)})
	cmd.SetArgs([]string{"--kubeconfig", api.kubeconfig, "console", "vmi1", "--timeout=1"})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()
	waitFor(t, "the connected message", func() bool {
		return strings.Contains(errOut.String(), "Successfully connected to vmi1 console. Press Ctrl+] or Ctrl+5 to exit console.")
	})
	if _, err := inW.Write([]byte("root\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the echo", func() bool { return out.String() == "root\n" })
	if _, err := inW.Write([]byte("ls\x1d")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("console ended with %v after Ctrl+]", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("console did not end after Ctrl+]")
	}
	if n := len(api.recorded()); n != 2 {
		t.Errorf("%d console requests, want 2 (a refusal and a retry)", n)
	}
}

// TestConsoleErrorIsNotRetried: other refusals end at once.
func TestConsoleErrorIsNotRetried(t *testing.T) {
	api := newFakeAPI(t)
	api.refuse = func(w http.ResponseWriter, _ *http.Request) bool {
		answerJSON(http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"bob\" cannot get resource \"virtualmachineinstances/console\"","reason":"Forbidden","code":403}`)(w, nil)
		return true
	}
	_, _, err := api.run(Options{}, "console", "vmi1")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `can't access VMI vmi1: forbidden: User "bob"`) {
		t.Fatalf("error %v, want the server's 403", err)
	}
	if n := len(api.recorded()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func BenchmarkStream(b *testing.B) {
	api := newFakeAPI(b)
	s, _ := NewSubresources(api.restConfig())
	conn, err := s.Stream(context.Background(), "ns1", "vmi1", "portforward/22")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	msg := bytes.Repeat([]byte("x"), 32*1024)
	got := make([]byte, len(msg))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := conn.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, got); err != nil {
			b.Fatal(err)
		}
	}
}
