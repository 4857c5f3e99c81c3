package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	return filepath.Join(podsDir, kubeletLocation(podsDir, podUID, vmiUID).Rel, SocketFile)
}

// kubeletLocation is a launcher pod's socket directory as the node agent
// looks for it.
func kubeletLocation(podsDir, podUID, vmiUID string) Location {
	return Location{Root: podsDir, Rel: filepath.Join(podUID, "volumes/kubernetes.io~empty-dir/sockets", vmiUID), Pod: podUID}
}

func TestResolvingClient(t *testing.T) {
	pods := filepath.Join(t.TempDir(), "pods")
	const vmi = "0d4a0f4e-1111-4222-8333-944455556666"
	const stalePod, livePod = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	stale, live := kubeletSocket(pods, stalePod, vmi), kubeletSocket(pods, livePod, vmi)
	if len(live) <= maxSocketPath {
		t.Fatalf("%s fits a socket address; the test needs a longer one", live)
	}
	var mu sync.Mutex
	var candidates []Location
	resolved := 0
	c := NewResolving(ResolveOptions{Name: "the launcher of VMI " + vmi, UID: vmi, Locations: func() []Location {
		mu.Lock()
		defer mu.Unlock()
		resolved++
		return candidates
	}})
	defer c.Close()
	set := func(locs ...Location) {
		mu.Lock()
		candidates = locs
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
	set(kubeletLocation(pods, stalePod, vmi))
	if _, err := c.Ping(ctx); !IsGone(err) || !strings.Contains(err.Error(), stale) {
		t.Errorf("Ping of a stale socket: %v, want the launcher gone, naming %s", err, stale)
	}

	// A new launcher pod: the client finds it when it connects again and
	// prefers it to the stale socket listed first.
	srv := servePing(t, listenUnix(t, live), vmi)
	set(kubeletLocation(pods, stalePod, vmi), kubeletLocation(pods, livePod, vmi))
	if uid, err := c.Ping(ctx); err != nil || uid != vmi {
		t.Errorf("Ping with a stale and a live socket: %q, %v, want the live launcher", uid, err)
	}
	// The static client reaches a long path too.
	if uid, err := New(live).Ping(ctx); err != nil || uid != vmi {
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

// serveLauncher answers /v1/ping, /v1/state and /v1/kill on ln as a
// launcher of the VMI with the given UID, counting the kills.
func serveLauncher(t *testing.T, ln net.Listener, uid string, kills *atomic.Int32) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/ping", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"uid": uid})
	})
	mux.HandleFunc("/v1/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, Status{UID: uid, Started: true})
	})
	mux.HandleFunc("/v1/kill", func(w http.ResponseWriter, _ *http.Request) {
		kills.Add(1)
		writeJSON(w, http.StatusOK, Status{UID: uid, StopRequested: true})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
}

// A resolving client never sends a command to the launcher of another VMI
// (review N3): a connection whose launcher pings with another UID is
// closed before any request is sent on it, and the call fails with a
// *UIDMismatchError naming both UIDs; a right launcher listed after it is
// used. A socket directory, socket or final status reached through a
// symbolic link is refused.
func TestResolvingClientChecksTheLauncher(t *testing.T) {
	pods := filepath.Join(t.TempDir(), "pods")
	const vmi, other = "0d4a0f4e-1111-4222-8333-944455556666", "0d4a0f4e-2222-4222-8333-944455556666"
	const pod, otherPod = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb", "33333333-cccc-4ccc-8ccc-cccccccccccc"
	var kills atomic.Int32
	serveLauncher(t, listenUnix(t, kubeletSocket(pods, otherPod, other)), other, &kills)
	// The other launcher's socket, also in the VMI's directory of a pod
	// (a hard link to it: what a symbolic link did before).
	wrong := kubeletSocket(pods, pod, vmi)
	if err := os.MkdirAll(filepath.Dir(wrong), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(kubeletSocket(pods, otherPod, other), wrong); err != nil {
		t.Fatal(err)
	}
	locs := []Location{kubeletLocation(pods, pod, vmi)}
	c := NewResolving(ResolveOptions{Name: "the launcher of VMI " + vmi, UID: vmi, Locations: func() []Location { return locs }})
	defer c.Close()
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Ping":  func() error { _, err := c.Ping(ctx); return err },
		"State": func() error { _, err := c.State(ctx); return err },
		"Kill":  func() error { _, err := c.Kill(ctx); return err },
	} {
		err := call()
		var m *UIDMismatchError
		if !errors.As(err, &m) || m.Want != vmi || m.Got != other || IsGone(err) ||
			!strings.Contains(err.Error(), vmi) || !strings.Contains(err.Error(), other) {
			t.Errorf("%s through the other VMI's socket: %v, want a *UIDMismatchError naming both UIDs", name, err)
		}
	}
	if n := kills.Load(); n != 0 {
		t.Errorf("the other VMI's launcher was sent %d kills", n)
	}

	// The right launcher, in another pod listed after: used.
	const rightPod = "44444444-dddd-4ddd-8ddd-dddddddddddd"
	var rightKills atomic.Int32
	serveLauncher(t, listenUnix(t, kubeletSocket(pods, rightPod, vmi)), vmi, &rightKills)
	locs = append(locs, kubeletLocation(pods, rightPod, vmi))
	if st, err := c.Kill(ctx); err != nil || st.UID != vmi || rightKills.Load() != 1 || kills.Load() != 0 {
		t.Errorf("Kill with the right launcher listed second: %+v, %v; kills %d (other VMI's %d), want 1 (0)", st, err, rightKills.Load(), kills.Load())
	}

	// Links: the VMI's directory, or its socket, as a link to the other
	// VMI's is refused and nothing is sent there.
	linkDir := kubeletLocation(pods, "55555555-eeee-4eee-8eee-eeeeeeeeeeee", vmi)
	if err := os.MkdirAll(filepath.Dir(linkDir.Path()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(kubeletSocket(pods, otherPod, other)), linkDir.Path()); err != nil {
		t.Fatal(err)
	}
	linkSock := kubeletLocation(pods, "66666666-ffff-4fff-8fff-ffffffffffff", vmi)
	if err := os.MkdirAll(linkSock.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(kubeletSocket(pods, otherPod, other), filepath.Join(linkSock.Path(), SocketFile)); err != nil {
		t.Fatal(err)
	}
	final, err := json.Marshal(Status{UID: other, Final: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(kubeletSocket(pods, otherPod, other)), FinalFile), final, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(kubeletSocket(pods, otherPod, other)), FinalFile), filepath.Join(linkSock.Path(), FinalFile)); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []Location{linkDir, linkSock} {
		locs = []Location{loc}
		c.Close() // no idle connection to the right launcher
		if _, err := c.Kill(ctx); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("Kill through a link at %s: %v, want ELOOP", loc.Path(), err)
		}
		if loc.HasSocket() {
			t.Errorf("%s: HasSocket through a link", loc.Path())
		}
		if st, err := loc.ReadFinal(vmi); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("ReadFinal through a link at %s: %+v, %v; want ELOOP", loc.Path(), st, err)
		}
	}
	if n := kills.Load(); n != 0 {
		t.Errorf("the other VMI's launcher was sent %d kills", n)
	}
	// Its final status read from its own directory is the other VMI's.
	if _, err := kubeletLocation(pods, otherPod, other).ReadFinal(vmi); !errors.As(err, new(*UIDMismatchError)) {
		t.Errorf("ReadFinal of another VMI's final status: %v, want a *UIDMismatchError", err)
	}
	if st, err := kubeletLocation(pods, otherPod, other).ReadFinal(other); err != nil || !st.Final {
		t.Errorf("ReadFinal: %+v, %v", st, err)
	}
}

// With CheckPeerPod, a socket in a pod's volume is used only when the
// process serving it runs in that pod's cgroup.
func TestResolvingClientChecksThePeersPod(t *testing.T) {
	dir := t.TempDir()
	pods := filepath.Join(dir, "pods")
	const vmi, pod = "0d4a0f4e-1111-4222-8333-944455556666", "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	var kills atomic.Int32
	serveLauncher(t, listenUnix(t, kubeletSocket(pods, pod, vmi)), vmi, &kills)
	c := NewResolving(ResolveOptions{Name: "the launcher of VMI " + vmi, UID: vmi, CheckPeerPod: true,
		Locations: func() []Location { return []Location{kubeletLocation(pods, pod, vmi)} }})
	defer c.Close()
	ctx := context.Background()

	// This test's process, serving the socket, is in no pod.
	var pe *PeerPodError
	if _, err := c.State(ctx); !errors.As(err, &pe) || pe.Pod != pod || pe.PID != os.Getpid() {
		t.Errorf("State of a launcher outside the pod: %v, want a *PeerPodError for pod %s, process %d", err, pod, os.Getpid())
	}

	// A /proc where this process is in the pod's cgroup (systemd driver).
	c.procDir = filepath.Join(dir, "proc")
	cgroup := filepath.Join(c.procDir, strconv.Itoa(os.Getpid()), "cgroup")
	if err := os.MkdirAll(filepath.Dir(cgroup), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cgroup, []byte("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+strings.ReplaceAll(pod, "-", "_")+".slice/cri-containerd-abc.scope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := c.State(ctx); err != nil || st.UID != vmi {
		t.Errorf("State of a launcher in its pod: %+v, %v", st, err)
	}
	c.Close()
	// ... in another pod's.
	if err := os.WriteFile(cgroup, []byte("0::/kubepods.slice/kubepods-pod33333333_cccc_4ccc_8ccc_cccccccccccc.slice/cri-containerd-abc.scope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kill(ctx); !errors.As(err, &pe) || !strings.Contains(err.Error(), "pod33333333_cccc") {
		t.Errorf("Kill of a launcher in another pod: %v, want a *PeerPodError showing its cgroup", err)
	}
	if n := kills.Load(); n != 0 {
		t.Errorf("the launcher outside the pod was sent %d kills", n)
	}
}

func TestInPodCgroup(t *testing.T) {
	const pod = "0d4a0f4e-1111-4222-8333-944455556666"
	for _, tc := range []struct {
		name, cgroup string
		want         bool
	}{
		{"systemd driver, cgroup v2", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d4a0f4e_1111_4222_8333_944455556666.slice/cri-containerd-0123.scope\n", true},
		{"systemd driver, guaranteed", "0::/kubepods.slice/kubepods-pod0d4a0f4e_1111_4222_8333_944455556666.slice/cri-containerd-0123.scope\n", true},
		{"cgroupfs driver, cgroup v1", "12:pids:/kubepods/besteffort/pod0d4a0f4e-1111-4222-8333-944455556666/0123\n4:memory:/kubepods/besteffort/pod0d4a0f4e-1111-4222-8333-944455556666/0123\n", true},
		{"seen from another cgroup namespace", "0::/../../kubepods-besteffort-pod0d4a0f4e_1111_4222_8333_944455556666.slice/cri-containerd-0123.scope\n", true},
		{"another pod", "0::/kubepods.slice/kubepods-pod0d4a0f4e_1111_4222_8333_944455556667.slice/cri-containerd-0123.scope\n", false},
		{"a prefix of the UID", "0::/kubepods.slice/kubepods-pod0d4a0f4e_1111_4222_8333_9444555566666.slice/x.scope\n", false},
		{"the UID elsewhere in a name", "0::/user.slice/evil-pod0d4a0f4e_1111_4222_8333_944455556666x.scope\n", false},
		{"no pod", "0::/user.slice/user-0.slice/session-1.scope\n", false},
		{"empty", "", false},
	} {
		if got := inPodCgroup(tc.cgroup, pod); got != tc.want {
			t.Errorf("%s: inPodCgroup(%q) = %v, want %v", tc.name, tc.cgroup, got, tc.want)
		}
	}
	if inPodCgroup("0::/kubepods/pod\n", "") {
		t.Error("an empty pod UID matched")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
