package launcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// testVMI has a container disk (volume 0), an empty disk and cloud-init.
func testVMI() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "0d4a0f4e-1111-4222-8333-944455556666"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				Devices: v1.Devices{Disks: []v1.Disk{
					{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "virtio"}}},
					{Name: "scratch", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "virtio"}}},
					{Name: "cloudinit", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "virtio"}}},
				}},
			},
			Volumes: []v1.Volume{
				{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}}},
				{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

type fixture struct {
	cfg  Config
	h    *hvfake.Hypervisor
	l    *Launcher
	c    *client.Client
	run  chan client.Status
	done chan struct{} // closed when Run returned
	// cancel ends Run's context, as SIGTERM does virt-launcher's.
	cancel context.CancelFunc
}

// start runs a launcher on the fake hypervisor with a container disk
// served for testVMI; qemu-img is not used (copy and sparse raw).
func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with changes to the launcher's configuration.
func startWith(t *testing.T, configure func(*Config)) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "lt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	vmi := testVMI()
	cd := filepath.Join(dir, "cd", string(vmi.UID))
	if err := os.MkdirAll(cd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cd, "disk_0.img"), []byte("raw disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sidecar whose mount is the per-VMI subdirectory serves at <dir>/<name>.
	if err := os.MkdirAll(filepath.Join(dir, "cd", "kernel-boot", "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: hvfake.New(), run: make(chan client.Status, 1), done: make(chan struct{})}
	f.cfg = Config{
		Name: vmi.Name, Namespace: vmi.Namespace, UID: string(vmi.UID),
		ShareDir: filepath.Join(dir, "share"), EphemeralDiskDir: filepath.Join(dir, "eph"),
		ContainerDiskDir: filepath.Join(dir, "cd"), PrivateDir: filepath.Join(dir, "priv"), HotplugDiskDir: filepath.Join(dir, "hotplug"),
		Hypervisor: f.h, QEMUImg: "none", PollInterval: 10 * time.Millisecond,
		GracePeriod: 200 * time.Millisecond, Emulation: true,
	}
	if configure != nil {
		configure(&f.cfg)
	}
	f.l, err = New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() {
		st, err := f.l.Run(ctx)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		f.run <- st
		close(f.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return")
		}
	})
	f.c = client.New(client.SocketPath(f.cfg.ShareDir, f.cfg.UID))
	t.Cleanup(f.c.Close)
	waitFor(t, func() bool { _, err := f.c.Ping(context.Background()); return err == nil })
	return f
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLauncherLifecycle(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	vmi := testVMI()

	st, err := f.c.Sync(ctx, vmi)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := client.Status{UID: string(vmi.UID), Domain: "ns_vm1", Defined: true, Started: true, State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused,
		HotplugDiskDir: f.cfg.HotplugDiskDir}
	if diff := cmp.Diff(want, st, ignoreTime); diff != "" {
		t.Errorf("Sync (-want +got):\n%s", diff)
	}
	// The start's steps, for the VMI's start timeline, in order.
	if s := st.Timeline; s == nil || s.DisksPrepared.IsZero() || s.DomainDefined.Before(s.DisksPrepared) || s.DomainStarted.Before(s.DomainDefined) {
		t.Errorf("Timeline = %+v, want disks prepared, then the domain defined, then started", s)
	}
	xml, _ := f.h.XML("ns_vm1")
	for _, s := range []string{"disk-data/root/disk.raw", "empty-disks/scratch.img", "cloud-init-data/ns/vm1/noCloud.iso", "priv/" + string(vmi.UID) + "/virt-serial0"} {
		if !strings.Contains(xml, s) {
			t.Errorf("domain XML does not use %s:\n%s", s, xml)
		}
	}
	iso, err := os.ReadFile(filepath.Join(f.cfg.EphemeralDiskDir, "cloud-init-data/ns/vm1/noCloud.iso"))
	if err != nil || !bytes.Contains(iso, []byte("#cloud-config")) || !bytes.Contains(iso, []byte("instance-id: "+string(vmi.UID))) {
		t.Errorf("cloud-init ISO: %v, missing user or meta data", err)
	}
	// A second sync changes nothing.
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Errorf("second Sync: %v", err)
	}
	if got := strings.Count(strings.Join(f.h.Calls(), ","), "Start"); got != 1 {
		t.Errorf("Start called %d times, want 1: %v", got, f.h.Calls())
	}

	// The console keeps what the guest printed before the client came.
	guest, _ := f.h.GuestConsole("ns_vm1")
	if _, err := guest.Write([]byte("GUEST-BOOTED\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { past, _, cancel := f.l.console.Subscribe(true); cancel(); return len(past) > 0 })
	con, err := f.c.Console(ctx, true)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	buf := make([]byte, 13)
	if _, err := io.ReadFull(con, buf); err != nil || string(buf) != "GUEST-BOOTED\n" {
		t.Errorf("console history: %q, %v", buf, err)
	}
	con.Close()

	if st, err := f.c.Pause(ctx); err != nil || st.State != hypervisor.StatePaused {
		t.Errorf("Pause: %+v, %v", st, err)
	}
	if st, err := f.c.Unpause(ctx); err != nil || st.State != hypervisor.StateRunning {
		t.Errorf("Unpause: %+v, %v", st, err)
	}
	var le *client.Error
	if _, err := f.c.Unpause(ctx); !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("Unpause of a running domain: %v, want a 409", err)
	}

	if _, err := f.c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	final := <-f.run
	if !final.Final || !final.Succeeded() || final.Reason != hypervisor.ReasonShutdown {
		t.Errorf("final status %+v, want a clean shutdown", final)
	}
	read, err := client.ReadFinal(f.cfg.ShareDir, f.cfg.UID)
	if err != nil || read.Reason != hypervisor.ReasonShutdown {
		t.Errorf("ReadFinal: %+v, %v", read, err)
	}
	if _, err := f.c.State(ctx); !client.IsGone(err) {
		t.Errorf("State after the end: %v, want the launcher gone", err)
	}
	if _, err := f.h.State(ctx, "ns_vm1"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("domain after the end: %v, want it undefined", err)
	}
	// The container disks' copies too: their sidecars exit when these are
	// gone, so the pod completes.
	for _, d := range []string{f.cfg.EphemeralDiskDir, f.cfg.PrivateDir, f.cfg.ContainerDiskDir} {
		entries, _ := os.ReadDir(d)
		if len(entries) != 0 {
			t.Errorf("%s not cleaned up: %v", d, entries)
		}
	}
}

func TestLauncherGuestIgnoresShutdown(t *testing.T) {
	f := start(t)
	f.h.IgnoreShutdown(true)
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	final := <-f.run
	if final.Reason != hypervisor.ReasonDestroyed || !final.StopRequested || !final.Succeeded() {
		t.Errorf("final %+v: want destroyed after the grace period, on request", final)
	}
}

func TestLauncherGuestCrash(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatal(err)
	}
	if err := f.h.SetState("ns_vm1", hypervisor.DomainState{State: hypervisor.StateCrashed, Reason: hypervisor.ReasonUnknown}); err != nil {
		t.Fatal(err)
	}
	final := <-f.run
	if final.State != hypervisor.StateCrashed || final.Succeeded() {
		t.Errorf("final %+v: want crashed, not succeeded", final)
	}
}

func TestLauncherRejectsOtherVMI(t *testing.T) {
	f := start(t)
	other := testVMI()
	other.UID = "other"
	var le *client.Error
	if _, err := f.c.Sync(context.Background(), other); !errors.As(err, &le) || le.Code != 500 || !strings.Contains(le.Message, "not this launcher's VMI") {
		t.Errorf("Sync of another VMI: %v", err)
	}
	missing := testVMI()
	missing.Spec.Volumes[0].ContainerDisk.Image = "x"
	if err := os.RemoveAll(filepath.Join(f.cfg.ContainerDiskDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Sync(context.Background(), missing); err == nil || !strings.Contains(err.Error(), "no container disk image served as disk_0") {
		t.Errorf("Sync without the served disk: %v", err)
	}
}

// ignoreTime ignores when a status was taken and when the start's steps
// ended (TestLauncherLifecycle checks those).
var ignoreTime = cmp.FilterPath(func(p cmp.Path) bool { s := p.Last().String(); return s == ".Time" || s == ".Timeline" }, cmp.Ignore())

// slowUndefine is the Fake hypervisor whose Undefine waits for release,
// telling entered when it starts waiting.
type slowUndefine struct {
	*hvfake.Hypervisor
	entered, release chan struct{}
}

func (s slowUndefine) Undefine(ctx context.Context, name string) error {
	close(s.entered)
	<-s.release
	return s.Hypervisor.Undefine(ctx, name)
}

// TestRunWaitsForAnotherEnd: when a Kill ends the domain while Run's own
// graceful stop (SIGTERM) runs, Run returns (and virt-launcher exits) only
// after the Kill's end removed the domain and the launcher's directories
// and wrote the final status. Before, Run returned at once and the process
// exit cut that cleanup short, leaving the VMI's socket directory behind.
func TestRunWaitsForAnotherEnd(t *testing.T) {
	slow := slowUndefine{Hypervisor: hvfake.New(), entered: make(chan struct{}), release: make(chan struct{})}
	f := startWith(t, func(c *Config) { c.Hypervisor = slow; c.GracePeriod = 10 * time.Second })
	slow.IgnoreShutdown(true)
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatal(err)
	}
	go f.l.Kill(ctx)
	<-slow.entered
	f.cancel() // SIGTERM: Run's stop finds the end already begun
	select {
	case <-f.done:
		close(slow.release)
		t.Fatal("Run returned while the Kill's end was still undefining the domain")
	case <-time.After(300 * time.Millisecond):
	}
	close(slow.release)
	final := <-f.run
	if !final.Final || final.Reason != hypervisor.ReasonDestroyed {
		t.Errorf("final %+v, want destroyed", final)
	}
	if _, err := client.ReadFinal(f.cfg.ShareDir, f.cfg.UID); err != nil {
		t.Errorf("final status when Run returned: %v", err)
	}
	for _, d := range []string{f.cfg.EphemeralDiskDir, f.cfg.PrivateDir} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("%s not cleaned up when Run returned: %v", d, entries)
		}
	}
}

// TestLauncherStartsPaused (#38): a VMI with startStrategy Paused (what
// `virtctl start --paused` writes) starts its guest paused, reported as the
// user's pause, and runs once unpaused.
func TestLauncherStartsPaused(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	vmi := testVMI()
	paused := v1.StartStrategyPaused
	vmi.Spec.StartStrategy = &paused
	st, err := f.c.Sync(ctx, vmi)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !st.Started || st.State != hypervisor.StatePaused || st.Reason != hypervisor.ReasonUser {
		t.Fatalf("Sync of a paused start: started %v, %s (%s); want started, Paused (User)", st.Started, st.State, st.Reason)
	}
	if calls := strings.Join(f.h.Calls(), ","); strings.Contains(calls, "Resume") {
		t.Errorf("the paused start resumed the guest: %s", calls)
	}
	if st, err := f.c.Unpause(ctx); err != nil || st.State != hypervisor.StateRunning {
		t.Errorf("Unpause: %+v, %v", st, err)
	}
}

// TestLauncherSyncNotReady (#38 item 6): a kernel-boot file the pod's
// sidecar has not copied in yet makes Sync answer ErrNotReady (503), which
// the node agent waits on quietly; once the file is there, Sync starts the
// domain.
func TestLauncherSyncNotReady(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	vmi := testVMI()
	vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "kernel:1", KernelPath: "/boot/vmlinuz"}}}
	_, err := f.c.Sync(ctx, vmi)
	var le *client.Error
	if !errors.Is(err, client.ErrNotReady) || !errors.As(err, &le) || le.Code != 503 {
		t.Fatalf("Sync without the kernel: %v, want ErrNotReady (503)", err)
	}
	if err := os.WriteFile(filepath.Join(f.cfg.ContainerDiskDir, "kernel-boot", "boot", "vmlinuz"), []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := f.c.Sync(ctx, vmi); err != nil || !st.Started {
		t.Fatalf("Sync with the kernel there: %+v, %v", st, err)
	}
}

// TestLauncherHotplugsSockets (#38 item 4): a running VMI whose sockets
// grow within maxSockets gets the vCPUs live (SetVCPUs with sockets ×
// cores × threads), and its status reports the topology; fewer sockets are
// left to a restart, and more than maxSockets are refused by field.
func TestLauncherHotplugsSockets(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	vmi := testVMI()
	vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 2, MaxSockets: 3}
	st, err := f.c.Sync(ctx, vmi)
	if err != nil || !st.Started {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	if want := (v1.CPUTopology{Sockets: 1, Cores: 2, Threads: 1}); st.CPUTopology == nil || *st.CPUTopology != want {
		t.Fatalf("status CPU topology %+v, want %+v", st.CPUTopology, want)
	}
	vmi.Spec.Domain.CPU.Sockets = 2
	if st, err = f.c.Sync(ctx, vmi); err != nil {
		t.Fatalf("Sync with 2 sockets: %v", err)
	}
	if n, err := f.h.VCPUs(st.Domain); n != 4 || err != nil {
		t.Errorf("vCPUs after the hotplug: %d, %v; want 4", n, err)
	}
	if st.CPUTopology == nil || st.CPUTopology.Sockets != 2 {
		t.Errorf("status CPU topology %+v, want 2 sockets", st.CPUTopology)
	}
	vmi.Spec.Domain.CPU.Sockets = 1 // a reduction waits for a restart
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Fatalf("Sync with 1 socket: %v", err)
	}
	if n, _ := f.h.VCPUs(st.Domain); n != 4 {
		t.Errorf("vCPUs after asking for fewer sockets: %d, want 4 (unchanged)", n)
	}
	vmi.Spec.Domain.CPU.Sockets = 4
	if _, err := f.c.Sync(ctx, vmi); err == nil || !strings.Contains(err.Error(), "spec.domain.cpu.sockets: 4 is more than maxSockets (3)") {
		t.Errorf("Sync with 4 sockets: %v, want refused naming maxSockets", err)
	}
}

// TestLauncherHotplugsMemory: a VMI with maxGuest boots with its guest
// memory and plugs what its status.memory.guestRequested adds (the VMI
// controller's go-ahead), never less than it has; the status reports the
// memory at boot, requested and plugged.
func TestLauncherHotplugsMemory(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	vmi := testVMI()
	gi := resource.MustParse("1Gi")
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: &gi, MaxGuest: ptr(resource.MustParse("2Gi"))}
	st, err := f.c.Sync(ctx, vmi)
	if err != nil || !st.Started {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	if m := st.Memory; m == nil || m.GuestAtBoot.String() != "1Gi" || m.GuestRequested.String() != "1Gi" || m.GuestCurrent.String() != "1Gi" {
		t.Fatalf("status memory at boot %+v, want 1Gi booted, requested and current", st.Memory)
	}
	// The spec alone plugs nothing: the pod must have the memory first.
	vmi.Spec.Domain.Memory.Guest = ptr(resource.MustParse("1536Mi"))
	if st, err = f.c.Sync(ctx, vmi); err != nil || st.Memory.GuestRequested.String() != "1Gi" {
		t.Fatalf("Sync with more spec memory only: %+v, %v; want 1Gi still requested", st.Memory, err)
	}
	vmi.Status.Memory = &v1.MemoryStatus{GuestAtBoot: &gi, GuestRequested: ptr(resource.MustParse("1536Mi"))}
	if st, err = f.c.Sync(ctx, vmi); err != nil {
		t.Fatalf("Sync with 1536Mi requested: %v", err)
	}
	if m := st.Memory; m.GuestRequested.String() != "1536Mi" || m.GuestCurrent.Value() != 1536<<20 {
		t.Errorf("status memory after the hotplug %+v, want 1536Mi requested and current", m)
	}
	if m, err := f.h.PluggedMemory(ctx, st.Domain); err != nil || m.Requested != 512<<20 {
		t.Errorf("virtio-mem after the hotplug: %+v, %v; want 512Mi requested", m, err)
	}
	vmi.Status.Memory.GuestRequested = &gi // less: never unplugged here
	if st, err = f.c.Sync(ctx, vmi); err != nil || st.Memory.GuestRequested.String() != "1536Mi" {
		t.Errorf("Sync asking for less: %+v, %v; want 1536Mi kept", st.Memory, err)
	}
	vmi.Status.Memory.GuestRequested = ptr(resource.MustParse("3Gi"))
	if _, err := f.c.Sync(ctx, vmi); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("Sync asking for more than maxGuest: %v, want refused", err)
	}
}

// do sends req to the launcher's command socket as it is, without the
// client's checks.
func (f *fixture) do(req *http.Request) (*http.Response, error) {
	sock := client.SocketPath(f.cfg.ShareDir, f.cfg.UID)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	return hc.Do(req)
}
