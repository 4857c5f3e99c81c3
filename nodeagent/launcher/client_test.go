package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// listenUnix listens on a UNIX socket at path, however long: through
// /proc/self/fd/<its directory> as the client dials it. Closing the
// listener leaves the socket file, as a killed launcher does.
func listenUnix(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
	if err != nil {
		t.Fatal(err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	return ul
}

// servePing answers /v1/ping with uid on ln until the test ends.
func servePing(t *testing.T, ln net.Listener, uid string) *http.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/ping", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"uid": uid})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return srv
}

// kubeletSocket is where a launcher pod's socket is seen from the node: a
// path longer than a UNIX socket address holds.
func kubeletSocket(podsDir, podUID, vmiUID string) string {
	return filepath.Join(podsDir, podUID, "volumes/kubernetes.io~empty-dir/sockets", vmiUID, SocketFile)
}

func TestResolvingClient(t *testing.T) {
	pods := filepath.Join(t.TempDir(), "pods")
	const vmi = "0d4a0f4e-1111-4222-8333-944455556666"
	stale := kubeletSocket(pods, "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa", vmi)
	live := kubeletSocket(pods, "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb", vmi)
	if len(live) <= maxSocketPath {
		t.Fatalf("%s fits a socket address; the test needs a longer one", live)
	}
	var mu sync.Mutex
	var candidates []string
	resolved := 0
	c := NewResolvingClient("the launcher of VMI "+vmi, func() []string {
		mu.Lock()
		defer mu.Unlock()
		resolved++
		return candidates
	})
	defer c.Close()
	set := func(paths ...string) {
		mu.Lock()
		candidates = paths
		mu.Unlock()
	}
	ctx := context.Background()

	// The launcher pod has not started yet.
	_, err := c.Ping(ctx)
	if !IsGone(err) || !strings.Contains(err.Error(), "the launcher of VMI "+vmi) {
		t.Errorf("Ping with no socket: %v, want the launcher gone, named", err)
	}

	// A launcher that was killed left its socket.
	ln := listenUnix(t, stale)
	ln.Close()
	set(stale)
	if _, err := c.Ping(ctx); !IsGone(err) || !strings.Contains(err.Error(), stale) {
		t.Errorf("Ping of a stale socket: %v, want the launcher gone, naming %s", err, stale)
	}

	// A new launcher pod: the client finds it when it connects again and
	// prefers it to the stale socket listed first.
	srv := servePing(t, listenUnix(t, live), "live")
	set(stale, live)
	if uid, err := c.Ping(ctx); err != nil || uid != "live" {
		t.Errorf("Ping with a stale and a live socket: %q, %v, want the live launcher", uid, err)
	}
	// The static client reaches a long path too.
	if uid, err := NewClient(live).Ping(ctx); err != nil || uid != "live" {
		t.Errorf("NewClient(%s).Ping: %q, %v", live, uid, err)
	}

	// The launcher exits: its connection closes, the client resolves again.
	srv.Close()
	before := resolved
	if _, err := c.Ping(ctx); !IsGone(err) {
		t.Errorf("Ping after the launcher exited: %v, want it gone", err)
	}
	if resolved == before {
		t.Error("the client did not look for the socket again when it reconnected")
	}
}
