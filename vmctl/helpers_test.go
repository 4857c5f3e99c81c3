package vmctl

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
)

const testToken = "test-token"

// request is what the fake API server saw of one request.
type request struct {
	Method, Path, Body, Auth, ContentType string
	Subprotocols                          []string
}

// fakeAPI is an HTTPS server standing in for the Kubernetes API server in
// front of virt-api: it records requests and answers with handler, or
// upgrades stream paths to an echoing WebSocket.
type fakeAPI struct {
	t      testing.TB
	server *httptest.Server

	mu       sync.Mutex
	requests []request
	// answer, when set, answers plain requests (after recording them);
	// default: 200 with an empty body.
	answer http.HandlerFunc
	// upgrader answers WebSocket requests; nil means KubeVirt's (plain
	// subprotocol).
	upgrader *websocket.Upgrader
	// refuse, when set, may answer a WebSocket request instead of
	// upgrading it; it returns true when it did.
	refuse func(w http.ResponseWriter, r *http.Request) bool
	// streams counts upgraded streams.
	streams int

	kubeconfig string
}

func newFakeAPI(t testing.TB) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t}
	f.server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	f.kubeconfig = f.writeKubeconfig("ns1")
	return f
}

// writeKubeconfig writes a kubeconfig for the server, with a bearer token
// and namespace as the context's.
func (f *fakeAPI) writeKubeconfig(namespace string) string {
	f.t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.server.Certificate().Raw})
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: ` + f.server.URL + `
    certificate-authority-data: ` + base64.StdEncoding.EncodeToString(ca) + `
users:
- name: tester
  user:
    token: ` + testToken + `
contexts:
- name: test
  context:
    cluster: test
    user: tester
    namespace: ` + namespace + `
current-context: test
`
	path := filepath.Join(f.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// restConfig is a rest.Config for the server, as the e2e tests would have.
func (f *fakeAPI) restConfig() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.server.Certificate().Raw})
	return &rest.Config{Host: f.server.URL, BearerToken: testToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := request{
		Method: r.Method, Path: r.URL.EscapedPath(), Body: string(body),
		Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"),
		Subprotocols: websocket.Subprotocols(r),
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	answer, upgrader, refuse := f.answer, f.upgrader, f.refuse
	f.mu.Unlock()

	if websocket.IsWebSocketUpgrade(r) {
		if refuse != nil && refuse(w, r) {
			return
		}
		if upgrader == nil {
			upgrader = &websocket.Upgrader{Subprotocols: []string{PlainStreamProtocol}}
		}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.streams++
		f.mu.Unlock()
		echo(ws)
		return
	}
	if answer != nil {
		answer(w, r)
	}
}

// echo sends every message back as a binary message, until the peer
// closes.
func echo(ws *websocket.Conn) {
	defer func() { _ = ws.Close() }()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if err := ws.WriteMessage(websocket.BinaryMessage, data); err != nil {
			return
		}
	}
}

func (f *fakeAPI) recorded() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

func (f *fakeAPI) streamCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams
}

func (f *fakeAPI) setAnswer(h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = h
}

// answerJSON answers every plain request with code and body.
func answerJSON(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// run executes vmctl with args against the fake API (its kubeconfig
// first) and returns what it printed.
func (f *fakeAPI) run(opts Options, args ...string) (stdout, stderr string, err error) {
	f.t.Helper()
	var out, errOut bytes.Buffer
	if opts.Streams.In == nil {
		opts.Streams.In = strings.NewReader("")
	}
	if opts.Streams.Out == nil {
		opts.Streams.Out = &out
	}
	if opts.Streams.ErrOut == nil {
		opts.Streams.ErrOut = &errOut
	}
	if opts.Name == "" {
		opts.Name = "vmctl"
	}
	cmd := NewCommand(opts)
	cmd.SetArgs(append([]string{"--kubeconfig", f.kubeconfig}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// streams are the standard streams of a command under test.
func streams(in io.Reader, out, errOut io.Writer) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: in, Out: out, ErrOut: errOut}
}

// syncBuffer is a bytes.Buffer safe for a command writing while a test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// background runs vmctl with args in the background; stop cancels it
// and returns its error.
func (f *fakeAPI) background(opts Options, args ...string) (out, errOut *syncBuffer, stop func() error) {
	f.t.Helper()
	out, errOut = &syncBuffer{}, &syncBuffer{}
	if opts.Streams.In == nil {
		opts.Streams.In = strings.NewReader("")
	}
	opts.Streams.Out, opts.Streams.ErrOut = out, errOut
	opts.Name = "vmctl"
	cmd := NewCommand(opts)
	cmd.SetArgs(append([]string{"--kubeconfig", f.kubeconfig}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(10 * time.Second):
				f.t.Fatalf("vmctl %v did not end after its context was cancelled", args)
			}
		})
		return result
	}
	f.t.Cleanup(func() { _ = stop() })
	return out, errOut, stop
}
