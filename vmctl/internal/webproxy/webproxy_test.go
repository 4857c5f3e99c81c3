package webproxy

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
)

const prefix = "/apis/subresources.kubevirt.io/v1/namespaces/"

// TestAPIProxyKeepsTheServerPath: with an API server URL with a path (a
// path-routing proxy in front of it), requests and upgrades go below it.
func TestAPIProxyKeepsTheServerPath(t *testing.T) {
	var mu sync.Mutex
	var got []string
	console := websocket.Server{
		Handshake: func(cfg *websocket.Config, _ *http.Request) error {
			cfg.Protocol = []string{"plain.kubevirt.io"}
			return nil
		},
		Handler: func(ws *websocket.Conn) { _ = ws.Close() },
	}
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath())
		mu.Unlock()
		if r.Header.Get("Upgrade") != "" {
			console.ServeHTTP(w, r)
		}
	}))
	defer api.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	cfg := &rest.Config{Host: api.URL, BearerToken: "test-token", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	cfg.Host += "/k8s/clusters/c1"
	p, err := New(cfg, nil, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(p)
	defer server.Close()

	resp, err := http.Get(server.URL + "/apis/subresources.kubevirt.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	wsConfig, _ := websocket.NewConfig("ws"+strings.TrimPrefix(server.URL, "http")+prefix+"ns1/virtualmachineinstances/vmi1/vnc", server.URL)
	wsConfig.Protocol = []string{"plain.kubevirt.io"}
	ws, err := websocket.DialConfig(wsConfig)
	if err != nil {
		t.Fatalf("WebSocket through the proxy: %v", err)
	}
	_ = ws.Close()

	mu.Lock()
	defer mu.Unlock()
	want := []string{"/k8s/clusters/c1/apis/subresources.kubevirt.io/v1", "/k8s/clusters/c1" + prefix + "ns1/virtualmachineinstances/vmi1/vnc"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("paths the API server saw (-want +got):\n%s", d)
	}
}
