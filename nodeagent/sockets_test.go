package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/podtemplate"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// listenUnix listens on a UNIX socket at path, however long (a kubelet
// pod's volume is deeper than a socket address holds), through
// /proc/self/fd/<its directory>. Closing the listener leaves the socket
// file, as a killed launcher does.
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

// fakeLauncher answers /v1/ping and /v1/state on ln with st until closed.
func fakeLauncher(t *testing.T, ln net.Listener, st client.Status) *http.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/ping", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"uid": st.UID})
	})
	mux.HandleFunc("/v1/state", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return srv
}

// dirPaths are the paths of socket directories.
func dirPaths(locs []client.Location) []string {
	var out []string
	for _, l := range locs {
		out = append(out, l.Path())
	}
	return out
}

// socketPaths are the paths of the sockets in socket directories.
func socketPaths(locs []client.Location) []string {
	var out []string
	for _, l := range locs {
		out = append(out, filepath.Join(l.Path(), client.SocketFile))
	}
	return out
}

// podSocketDir is a launcher pod's socket directory as the kubelet lays it
// out on the node.
func podSocketDir(podsDir, podUID, vmiUID string) string {
	return filepath.Join(podsDir, podUID, "volumes", "kubernetes.io~empty-dir", "sockets", vmiUID)
}

// With a real kubelet the launcher's socket is in its pod's sockets
// emptyDir. The agent finds it there when it appears, prefers a live
// socket to a stale one, reads the final state left there, and leaves the
// kubelet's directories alone.
func TestAgentFindsLauncherInKubeletPod(t *testing.T) {
	dir := t.TempDir()
	share, pods := filepath.Join(dir, "share"), filepath.Join(dir, "pods")
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "0d4a0f4e-1111-4222-8333-944455556666",
			Labels: map[string]string{v1.NodeNameLabel: "node01"}},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01"},
	}
	uid := string(vmi.UID)
	stalePod, livePod := "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	vmi.Status.ActivePods = map[types.UID]string{types.UID(stalePod): "node01", types.UID(livePod): "node01"}
	vmClient := vmfake.NewSimpleClientset(vmi.DeepCopy())
	recorder := record.NewFakeRecorder(10)
	a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(), ShareDir: share, KubeletPodsDir: pods,
		Recorder: recorder})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "ns/vm1"
	syncTo := func(want v1.VirtualMachineInstancePhase) {
		t.Helper()
		got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.informer.GetIndexer().Update(got); err != nil {
			t.Fatal(err)
		}
		if _, err := a.sync(ctx, key); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if got, _ = vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{}); got.Status.Phase != want {
			t.Fatalf("phase %s (%s), want %s", got.Status.Phase, got.Status.Reason, want)
		}
	}

	// Scheduled, the launcher pod not started yet: the agent waits.
	syncTo(v1.Scheduled)

	// Now: an earlier launcher pod whose launcher was killed (its socket
	// is left, changed last so it is tried first), the launcher pod of
	// this VMI, another VMI's launcher pod, and a pod without volumes.
	stale := filepath.Join(podSocketDir(pods, stalePod, uid), client.SocketFile)
	live := filepath.Join(podSocketDir(pods, livePod, uid), client.SocketFile)
	running := client.Status{UID: uid, Domain: "ns_vm1", Defined: true, Started: true, State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}
	srv := fakeLauncher(t, listenUnix(t, live), running)
	listenUnix(t, stale).Close()
	other := running
	other.UID = "99999999-0000-4000-8000-000000000000"
	fakeLauncher(t, listenUnix(t, filepath.Join(podSocketDir(pods, "33333333-cccc-4ccc-8ccc-cccccccccccc", other.UID), client.SocketFile)), other)
	if err := os.MkdirAll(filepath.Join(pods, "44444444-dddd-4ddd-8ddd-dddddddddddd", "containers"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An impostor: a pod the VMI's status.activePods does not list, whose
	// volume holds a socket in the VMI's UID's name, answering for it.
	impostor := running
	impostor.Domain = "ns_impostor"
	impostorSock := filepath.Join(podSocketDir(pods, "55555555-eeee-4eee-8eee-eeeeeeeeeeee", uid), client.SocketFile)
	fakeLauncher(t, listenUnix(t, impostorSock), impostor)
	later := time.Now().Add(time.Minute)
	for _, d := range []string{filepath.Dir(impostorSock), filepath.Dir(stale)} {
		if err := os.Chtimes(d, later, later); err != nil {
			t.Fatal(err)
		}
		later = later.Add(-time.Second)
	}
	if diff := cmp.Diff([]string{stale, live}, socketPaths(launcherSockets(share, pods, uid, a.podsOf(vmi.UID)))); diff != "" {
		t.Errorf("launcher sockets (-want +got):\n%s", diff)
	}
	if got, err := a.client(vmi.UID).Ping(ctx); err != nil || got != uid {
		t.Errorf("Ping: %q, %v; want the live launcher of %s", got, err, uid)
	}
	syncTo(v1.Running)

	// The guest shuts down: the launcher leaves its final state next to its
	// socket and exits.
	final := running
	final.State, final.Reason, final.Final = hypervisor.StateShutoff, hypervisor.ReasonShutdown, true
	b, _ := json.Marshal(final)
	if err := os.WriteFile(filepath.Join(filepath.Dir(live), client.FinalFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	syncTo(v1.Succeeded)
	// KubeVirt's event of a shut-down guest, which tools wait for.
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if !slices.Contains(events, "Normal Stopped The VirtualMachineInstance was shut down.") {
		t.Errorf("events %q lack KubeVirt's Normal Stopped event", events)
	}

	// Cleaning up after the launcher removes the agent's own socket
	// directory but nothing in the pods' volumes: the kubelet removes
	// those with the pods.
	own := client.SocketDir(share, uid)
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if again, err := a.stopAndClean(ctx, key, nil, vmi.UID, time.Second); again != 0 || err != nil {
		t.Fatalf("stopAndClean: %v, %v; want the launcher gone", again, err)
	}
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want it removed", own, err)
	}
	for _, p := range []string{stale, filepath.Join(filepath.Dir(live), client.FinalFile)} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the agent removed %s from a pod's volume: %v", p, err)
		}
	}
}

// The local arrangement (nodeagent/localnode, make demo): a socket and
// final state under ShareDir come first.
func TestLauncherDirsPreferShareDir(t *testing.T) {
	dir := t.TempDir()
	share, pods := filepath.Join(dir, "share"), filepath.Join(dir, "pods")
	const uid = "0d4a0f4e-1111-4222-8333-944455556666"
	local, pod := client.SocketDir(share, uid), podSocketDir(pods, "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb", uid)
	for _, d := range []string{local, pod} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(client.Status{UID: uid, Final: true, Message: d})
		if err := os.WriteFile(filepath.Join(d, client.FinalFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{local, pod}, dirPaths(launcherDirs(share, pods, uid, nil))); diff != "" {
		t.Errorf("launcher directories (-want +got):\n%s", diff)
	}
	a := &Agent{cfg: Config{ShareDir: share, KubeletPodsDir: pods}}
	if st, err := a.readFinal(uid); err != nil || st.Message != local {
		t.Errorf("readFinal: %+v, %v; want the one in %s", st, err, local)
	}
	if err := os.RemoveAll(local); err != nil {
		t.Fatal(err)
	}
	if st, err := a.readFinal(uid); err != nil || st.Message != pod {
		t.Errorf("readFinal: %+v, %v; want the one in %s", st, err, pod)
	}
	if err := os.RemoveAll(pods); err != nil {
		t.Fatal(err)
	}
	if _, err := a.readFinal(uid); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("readFinal with none: %v, want not-exist", err)
	}
}

// The agent looks for sockets in the volume podtemplate mounts at
// <share dir>/sockets.
func TestSocketsVolumeIsPodtemplates(t *testing.T) {
	r, err := podtemplate.New(podtemplate.Config{LauncherImage: "vmkit/virt-launcher:test"})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := r.RenderLaunchPod(&v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "0d4a0f4e-1111-4222-8333-944455556666"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	socketsDir := filepath.Dir(client.SocketDir(r.Config().ShareDir, "uid"))
	var mounted string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath == socketsDir {
			mounted = m.Name
		}
	}
	if mounted != socketsVolume {
		t.Fatalf("the launcher pod mounts volume %q at %s, the agent looks in %q", mounted, socketsDir, socketsVolume)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == mounted && v.EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir: %+v", v.Name, v.VolumeSource)
		}
	}
}

// The review's scratch TestAuditSocketSymlinkRedirect (N3), inverted: a
// tenant who replaces its VMI's socket directory in its launcher pod's
// sockets volume by a symbolic link to another VMI's gets its own
// launcher reported gone; the agent neither reads the other VMI's state
// nor kills its guest, and reads no final status through a link. A
// launcher of another VMI answering in the tenant's directory (its socket
// hard-linked there) fails every call with a UID mismatch naming both
// VMIs, and is sent no command.
func TestSocketLinksDoNotLeadToAnotherLauncher(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "n3") // short: the launcher's socket address must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pods := filepath.Join(dir, "pods")
	// The victim's launcher, in its own pod volume.
	victimShare := filepath.Join(dir, "v")
	victim := orphanVMI("victim", "0d4a0f4e-bbbb-4222-8333-944455556666")
	h := hvfake.New()
	agenttest.RunGuest(t, dir, victimShare, h, victim)
	victimDir := client.SocketDir(victimShare, string(victim.UID))

	// The attacker's pod volume: sockets/<attacker uid> -> the victim's dir.
	attacker := types.UID("0d4a0f4e-cccc-4222-8333-944455556666")
	const attackerPod = "attacker-pod"
	attDir := podSocketDir(pods, attackerPod, string(attacker))
	if err := os.MkdirAll(filepath.Dir(attDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victimDir, attDir); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(), Kube: fake.NewClientset(),
		ShareDir: filepath.Join(dir, "share"), KubeletPodsDir: pods, Recorder: record.NewFakeRecorder(10)})
	if err != nil {
		t.Fatal(err)
	}
	a.notePods(&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: attacker},
		Status: v1.VirtualMachineInstanceStatus{ActivePods: map[types.UID]string{attackerPod: "node01"}}})
	if socks := launcherSockets(a.cfg.ShareDir, pods, string(attacker), a.podsOf(attacker)); len(socks) != 0 {
		t.Errorf("sockets of the attacker's VMI: %v, want none (its directory is a link)", socketPaths(socks))
	}
	c := a.client(attacker)
	if st, err := c.State(ctx); !client.IsGone(err) {
		t.Errorf("State through the link: %+v, %v; want the launcher gone", st, err)
	}
	if st, err := c.Kill(ctx); !client.IsGone(err) {
		t.Errorf("Kill through the link: %+v, %v; want the launcher gone", st, err)
	}
	victimRuns := func() {
		t.Helper()
		time.Sleep(200 * time.Millisecond)
		vst, err := client.New(client.SocketPath(victimShare, string(victim.UID))).State(ctx)
		if err != nil || vst.StopRequested || vst.Final || vst.State != hypervisor.StateRunning {
			t.Errorf("the victim after the attacker's kill: %+v, %v; want it running", vst, err)
		}
		if _, err := os.Lstat(filepath.Join(victimDir, client.FinalFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the victim left a final status: %v", err)
		}
	}
	victimRuns()
	// The victim's final status, seen through the link, is not read.
	b, _ := json.Marshal(client.Status{UID: string(attacker), Final: true, State: hypervisor.StateShutoff})
	elsewhere := filepath.Join(dir, "elsewhere.json")
	if err := os.WriteFile(elsewhere, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victimDir, client.FinalFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := a.readFinal(attacker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("readFinal through a linked directory: %+v, %v; want none", st, err)
	}
	if err := os.Remove(filepath.Join(victimDir, client.FinalFile)); err != nil {
		t.Fatal(err)
	}

	// The attacker's directory is real, its final.json a link to a file
	// outside the volume (naming the attacker's VMI, so only the link
	// refuses it), its socket a hard link to the victim's.
	if err := os.Remove(attDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(attDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(attDir, client.FinalFile)); err != nil {
		t.Fatal(err)
	}
	if st, err := a.readFinal(attacker); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("readFinal of a final.json link: %+v, %v; want ELOOP", st, err)
	}
	if err := os.Link(client.SocketPath(victimShare, string(victim.UID)), filepath.Join(attDir, client.SocketFile)); err != nil {
		t.Fatal(err)
	}
	a.forgetClient(attacker)
	c = a.client(attacker)
	for name, call := range map[string]func() error{
		"Ping":     func() error { _, err := c.Ping(ctx); return err },
		"State":    func() error { _, err := c.State(ctx); return err },
		"Shutdown": func() error { _, err := c.Shutdown(ctx); return err },
		"Kill":     func() error { _, err := c.Kill(ctx); return err },
		"Migrate":  func() error { _, err := c.Migrate(ctx, client.MigrateRequest{}); return err },
	} {
		err := call()
		var m *client.UIDMismatchError
		if !errors.As(err, &m) || m.Want != string(attacker) || m.Got != string(victim.UID) || client.IsGone(err) {
			t.Errorf("%s through the victim's socket: %v; want a UID mismatch naming both VMIs", name, err)
		}
	}
	// A sync that stops the attacker's VMI fails, and stops nothing.
	if again, err := a.stopAndClean(ctx, "ns/attacker", nil, attacker, 0); err == nil || !strings.Contains(err.Error(), string(victim.UID)) {
		t.Errorf("stopAndClean of the attacker's VMI: %v, %v; want a UID mismatch", again, err)
	}
	victimRuns()
}
