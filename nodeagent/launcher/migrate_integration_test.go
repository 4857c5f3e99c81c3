package launcher_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/migrationproxy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The live migration of a real guest between two launchers on this
// machine, each in its own "pod": a mount namespace in which the pod's
// directory is mounted at the same path (podRoot), as every launcher pod
// has /var/run/kubevirt, with its own /etc/passwd holding KubeVirt's qemu
// user (uid 107), running its own libvirtd in session mode as that user (a
// non-root launcher, as KubeVirt's) with its own host UUID, and
// virt-launcher as that user. Between them, two migrationproxy managers
// (the source and the target node agent's) over mutual TLS, which reach
// the launchers' sockets through /proc/<launcher pid>/root as the node
// agent does.

const (
	// podRoot is where each pod's directory is mounted in its namespace.
	podRoot = "/run/vmkmig"
	// qemuUID is KubeVirt's non-root launcher user.
	qemuUID = 107
)

type migPod struct {
	name   string
	dir    string // the pod's directory on the host (podRoot inside)
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // the launcher's exit, once done is closed
	client *launcher.Client
	logs   *bytes.Buffer
	mu     sync.Mutex
}

func TestLiveMigrationBetweenLaunchers(t *testing.T) {
	for _, tool := range []string{"libvirtd", "setpriv", "qemu-system-x86_64", "qemu-img", "virsh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make test-deps installs libvirt and QEMU: hack/setup-libvirt.sh)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test runs launcher pods in their own mount namespaces and as uid 107: run it as root")
	}
	guest := testenv.RequireGuest(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("/tmp", "vmkmig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "virt-launcher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/virt-launcher")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building virt-launcher (needs libvirt-dev and pkg-config: make test-deps): %v\n%s", err, out)
	}
	if err := os.MkdirAll(podRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(podRoot) }) // only when empty: another run may use it

	uid := types.UID("6a1c0d5e-0000-4000-8000-" + fmt.Sprintf("%012d", time.Now().UnixNano()%1e12))
	vmi := migrationVMI(uid)
	initrd := tickerInitramfs(t, guest.IdleInitramfs)

	src := startPod(t, base, "a", bin, vmi, guest.Kernel, initrd)
	dst := startPod(t, base, "b", bin, vmi, guest.Kernel, initrd)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// The guest boots on the source and ticks.
	st := syncWithRetry(ctx, t, src, vmi)
	if !st.Started {
		t.Fatalf("source: domain not started: %+v", st)
	}
	srcTicks := watchTicks(ctx, t, src.client)
	before := srcTicks.waitAbove(t, 2, 60*time.Second, "the guest ticking on the source")
	t.Logf("guest runs on the source, uptime %.2f s", before)

	// The target launcher waits for the incoming domain.
	info, err := dst.client.PrepareMigrationTarget(ctx, vmi)
	if err != nil {
		t.Fatalf("preparing the target: %v", err)
	}
	if info.LibvirtSocket != podRoot+"/run/libvirt/libvirt-sock" || info.ShareDir != podRoot+"/share" || info.Domain != "default_vm-mig" {
		t.Errorf("target info = %+v", info)
	}
	if _, err := dst.client.PrepareMigrationTarget(ctx, vmi); err != nil {
		t.Errorf("preparing the target again: %v", err)
	}

	// The node agents' proxies, with mutual TLS between them.
	serverTLS, clientTLS := migrationTLS(t)
	targetProxy, err := migrationproxy.New(migrationproxy.Config{ListenAddress: "127.0.0.1", ServerTLS: serverTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer targetProxy.Close()
	sourceProxy, err := migrationproxy.New(migrationproxy.Config{ListenAddress: "127.0.0.1", ClientTLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer sourceProxy.Close()
	dstRoot := procRoot(ctx, t, dst.client)
	ports, err := targetProxy.StartTarget(string(uid), map[int]string{
		migrationproxy.LibvirtPort:         dstRoot + info.LibvirtSocket,
		migrationproxy.DirectMigrationPort: dstRoot + launcher.MigrationSocket(info.ShareDir, string(uid), launcher.DirectMigrationPort),
		migrationproxy.BlockMigrationPort:  dstRoot + launcher.MigrationSocket(info.ShareDir, string(uid), launcher.BlockMigrationPort),
	})
	if err != nil {
		t.Fatal(err)
	}
	srcInfo, err := src.client.MigrationInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srcRoot := procRoot(ctx, t, src.client)
	err = sourceProxy.StartSource(string(uid), "127.0.0.1", ports, func(port int) string {
		return srcRoot + launcher.MigrationSocket(srcInfo.ShareDir, string(uid), port)
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("AbortLeavesTheGuestOnTheSource", func(t *testing.T) {
		// 1 MiB/s: the guest's memory takes far longer than the abort.
		if _, err := src.client.Migrate(ctx, launcher.MigrateRequest{MigrationUID: "m-abort", BandwidthMiB: 1}); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		detected := waitStatus(ctx, t, dst.client, 60*time.Second, "the incoming domain on the target", func(s launcher.Status) bool {
			failIfMigrationFailed(ctx, t, src)
			return s.Migration != nil && s.Migration.DomainDetected
		})
		if detected.Started {
			t.Fatalf("target adopted the domain during the migration: %+v", detected)
		}
		if _, err := src.client.AbortMigration(ctx); err != nil {
			t.Fatalf("abort: %v", err)
		}
		st := waitStatus(ctx, t, src.client, 60*time.Second, "the aborted migration's end", func(s launcher.Status) bool {
			return s.Migration != nil && s.Migration.EndTimestamp != nil
		})
		if m := st.Migration; !m.Failed || m.Completed || m.AbortStatus != launcher.AbortSucceeded {
			t.Errorf("source migration after abort = %+v, want failed, abort succeeded", m)
		}
		if st.Final || st.State != hypervisor.StateRunning {
			t.Errorf("source after abort: %+v, want the guest running", st)
		}
		after := srcTicks.waitAbove(t, srcTicks.last()+2, 30*time.Second, "the guest ticking on the source after the abort")
		t.Logf("guest still runs on the source after the abort, uptime %.2f s", after)
		waitStatus(ctx, t, dst.client, 30*time.Second, "the target waiting again", func(s launcher.Status) bool {
			return s.Migration != nil && !s.Migration.DomainDetected && !s.Started && !s.Final
		})
		// Another abort has nothing to abort.
		var lerr *launcher.Error
		if _, err := src.client.AbortMigration(ctx); !errors.As(err, &lerr) || lerr.Code != 409 {
			t.Errorf("abort without a migration: %v, want 409", err)
		}
	})

	t.Run("MigrateKeepsTheGuestRunning", func(t *testing.T) {
		last := srcTicks.last()
		start := time.Now()
		if _, err := src.client.Migrate(ctx, launcher.MigrateRequest{MigrationUID: "m-1"}); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		// The source launcher exits cleanly with the final state Migrated.
		timeout := time.After(3 * time.Minute)
	wait:
		for {
			select {
			case <-src.done:
				break wait
			case <-timeout:
				t.Fatalf("the source launcher did not exit after the migration; its log:\n%s", src.log())
			case <-time.After(time.Second):
				failIfMigrationFailed(ctx, t, src)
			}
		}
		if src.err != nil {
			t.Errorf("source launcher exit: %v; log:\n%s", src.err, src.log())
		}
		elapsed := time.Since(start)
		final, err := launcher.ReadFinalDir(filepath.Join(src.dir, "share", "sockets", string(uid)))
		if err != nil {
			t.Fatalf("source final state: %v", err)
		}
		if final.State != hypervisor.StateShutoff || final.Reason != hypervisor.ReasonMigrated || final.Succeeded() {
			t.Errorf("source final state = %s (%s), succeeded %v; want Shutoff (Migrated), not a success", final.State, final.Reason, final.Succeeded())
		}
		if m := final.Migration; m == nil || !m.Completed || m.Failed || m.UID != "m-1" || m.Progress == nil {
			t.Fatalf("source final migration = %+v, want completed m-1 with progress", final.Migration)
		}
		t.Logf("migration: %v end to end, libvirt job %v, downtime %v, %d MiB sent", elapsed, final.Migration.Progress.Elapsed, final.Migration.Progress.Downtime, final.Migration.Progress.DataProcessed>>20)

		// The target adopted the domain: the same guest goes on ticking.
		st := waitStatus(ctx, t, dst.client, 30*time.Second, "the target running the guest", func(s launcher.Status) bool {
			return s.Started && s.State == hypervisor.StateRunning
		})
		if m := st.Migration; m == nil || !m.Completed || m.Role != "target" {
			t.Errorf("target migration = %+v, want completed", st.Migration)
		}
		dstTicks := watchTicks(ctx, t, dst.client)
		up := dstTicks.waitAbove(t, last+1, 60*time.Second, "the guest ticking on the target")
		t.Logf("the guest ticks on the target: uptime %.2f s, last seen on the source %.2f s", up, last)
		if up > last+elapsed.Seconds()+30 {
			t.Errorf("uptime on the target %.2f s is not the source's guest's (%.2f s before a %v migration)", up, last, elapsed)
		}
		// The migrated guest stops like any other.
		if _, err := dst.client.Kill(ctx); err != nil {
			t.Errorf("kill on the target: %v", err)
		}
		select {
		case <-dst.done:
		case <-time.After(time.Minute):
			t.Errorf("the target launcher did not exit after kill; log:\n%s", dst.log())
		}
	})
}

// migrationVMI is the tiny guest with an empty disk (so the migration
// copies a local disk: block migration) and a ticking initramfs.
func migrationVMI(uid types.UID) *v1.VirtualMachineInstance {
	grace := int64(2)
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-mig", UID: uid},
		Spec: v1.VirtualMachineInstanceSpec{
			TerminationGracePeriodSeconds: &grace,
			Domain: v1.DomainSpec{
				Machine: &v1.Machine{Type: "pc"},
				Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
					KernelArgs: "console=ttyS0 panic=-1 quiet mitigations=off cryptomgr.notests tsc=reliable no_timer_check",
					Container:  &v1.KernelBootContainer{Image: "vmkit/tiny-guest", KernelPath: "/boot/vmlinux", InitrdPath: "/boot/ticker.cpio.gz"},
				}},
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				Devices: v1.Devices{
					AutoattachMemBalloon: v1.BoolPtr(false), AutoattachPodInterface: v1.BoolPtr(false),
					Disks: []v1.Disk{{Name: "scratch", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "virtio"}}}},
				},
			},
			Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("16Mi")}}}},
		},
	}
}

// startPod prepares a pod directory and starts its libvirtd and launcher.
func startPod(t *testing.T, base, name, bin string, vmi *v1.VirtualMachineInstance, kernel, initrd string) *migPod {
	t.Helper()
	dir := filepath.Join(base, name)
	kb := filepath.Join(dir, "cd", string(vmi.UID), "kernel-boot")
	for _, d := range []string{"share", "eph", "priv", "run", "home", "cache", "config/libvirt", kb[len(dir)+1:]} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(kernel, filepath.Join(kb, "vmlinux")))
	must(os.Symlink(initrd, filepath.Join(kb, "ticker.cpio.gz")))
	hostUUID := fmt.Sprintf("6d0d1a5e-0000-4000-8000-%012x", time.Now().UnixNano()&0xffffffffffff)
	must(os.WriteFile(filepath.Join(dir, "config/libvirt/libvirtd.conf"), []byte("host_uuid = \""+hostUUID+"\"\n"), 0o644))
	// The pod's /etc/passwd and /etc/group: the host's plus the qemu user,
	// as the launcher image has it.
	for _, f := range []struct{ name, line string }{{"passwd", "qemu:x:107:107:qemu user:" + podRoot + "/home:/usr/sbin/nologin\n"}, {"group", "qemu:x:107:\n"}} {
		b, err := os.ReadFile("/etc/" + f.name)
		must(err)
		must(os.WriteFile(filepath.Join(dir, f.name), append(b, f.line...), 0o644))
	}
	must(filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, qemuUID, qemuUID)
	}))
	must(os.Chmod(filepath.Join(dir, "run"), 0o700))

	uri := "qemu+unix:///session?socket=" + podRoot + "/run/libvirt/libvirt-sock"
	launcherArgs := []string{bin, "--name", vmi.Name, "--uid", string(vmi.UID), "--namespace", vmi.Namespace,
		"--kubevirt-share-dir", podRoot + "/share", "--ephemeral-disk-dir", podRoot + "/eph",
		"--container-disk-dir", podRoot + "/cd", "--private-dir", podRoot + "/priv",
		"--qemu-timeout", "5m", "--grace-period-seconds", "5", "--use-emulation", "--force-emulation",
		"--libvirt-uri", uri}
	// Inside the pod: libvirtd in the background (under the launcher's
	// reaper), then the launcher.
	inner := fmt.Sprintf("libvirtd --pid-file %[1]s/libvirtd.pid >%[1]s/libvirtd.log 2>&1 & "+
		"i=0; while [ ! -S %[1]s/run/libvirt/libvirt-sock ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exec %[2]s",
		podRoot, shellJoin(launcherArgs))
	script := fmt.Sprintf("mount --bind %[1]s/passwd /etc/passwd && mount --bind %[1]s/group /etc/group && mount --bind %[1]s %[2]s && "+
		"exec setpriv --reuid=%[3]d --regid=%[3]d --clear-groups env -i PATH=%[4]s HOME=%[2]s/home XDG_RUNTIME_DIR=%[2]s/run "+
		"XDG_CONFIG_HOME=%[2]s/config XDG_CACHE_HOME=%[2]s/cache %[5]s --reap sh -c %[6]s",
		dir, podRoot, qemuUID, os.Getenv("PATH"), bin, shellQuote(inner))
	p := &migPod{name: name, dir: dir, done: make(chan struct{}), logs: &bytes.Buffer{}}
	p.cmd = exec.Command("sh", "-c", script)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
	p.cmd.Stdout, p.cmd.Stderr = (*lockedWriter)(p), (*lockedWriter)(p)
	must(p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	p.client = launcher.NewClient(filepath.Join(dir, "share", "sockets", string(vmi.UID), launcher.SocketFile))
	return p
}

type lockedWriter migPod

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logs.Write(b)
}

func (p *migPod) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	libvirtd, _ := os.ReadFile(filepath.Join(p.dir, "libvirtd.log"))
	return p.logs.String() + "\n--- libvirtd ---\n" + lastLines(string(libvirtd), 30)
}

// stop ends what the pod started: the launcher (SIGTERM, then SIGKILL to
// its process group), the domains its libvirtd still runs, then libvirtd.
func (p *migPod) stop(t *testing.T) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	b, err := os.ReadFile(filepath.Join(p.dir, "libvirtd.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	// QEMU processes of this libvirtd (children of the pod's reaper, then
	// of init): find them by their pid files in the pod's run directory.
	qemus, _ := filepath.Glob(filepath.Join(p.dir, "run", "libvirt", "qemu", "run", "*.pid"))
	for _, f := range qemus {
		if b, err := os.ReadFile(f); err == nil {
			q, err := strconv.Atoi(strings.TrimSpace(string(b)))
			// Only a QEMU of this pod: its command line names the pod's paths.
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", q))
			if err == nil && q > 1 && bytes.Contains(cmdline, []byte("qemu")) && bytes.Contains(cmdline, []byte(podRoot+"/")) {
				t.Logf("pod %s: killing the leftover QEMU %d", p.name, q)
				_ = syscall.Kill(q, syscall.SIGKILL)
			}
		}
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func syncWithRetry(ctx context.Context, t *testing.T, p *migPod, vmi *v1.VirtualMachineInstance) launcher.Status {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := p.client.Sync(ctx, vmi)
		if err == nil {
			return st
		}
		if time.Now().After(deadline) || !launcher.IsGone(err) {
			t.Fatalf("pod %s: sync: %v; log:\n%s", p.name, err, p.log())
		}
		select {
		case <-p.done:
			t.Fatalf("pod %s exited: %v; log:\n%s", p.name, p.err, p.log())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitStatus(ctx context.Context, t *testing.T, c *launcher.Client, timeout time.Duration, what string, cond func(launcher.Status) bool) launcher.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last launcher.Status
	var lastErr error
	for time.Now().Before(deadline) {
		st, err := c.State(ctx)
		if err == nil && cond(st) {
			return st
		}
		last, lastErr = st, err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("waiting %v for %s: last status %+v (migration %+v), error %v", timeout, what, last, last.Migration, lastErr)
	return last
}

// failIfMigrationFailed ends the test when the source reports its
// migration failed (it is not aborted in these waits).
func failIfMigrationFailed(ctx context.Context, t *testing.T, src *migPod) {
	t.Helper()
	st, err := src.client.State(ctx)
	if err == nil && st.Migration != nil && st.Migration.Failed && st.Migration.AbortStatus == "" {
		t.Fatalf("the migration failed: %s\nsource log:\n%s", st.Migration.FailureReason, src.log())
	}
}

// procRoot is the launcher's root directory as the node agent reaches it.
func procRoot(ctx context.Context, t *testing.T, c *launcher.Client) string {
	t.Helper()
	pid, err := c.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/proc/%d/root", pid)
}

// ticks follows "TICK <uptime>" lines on a launcher's console.
type ticks struct {
	mu   sync.Mutex
	max  float64
	seen chan struct{}
}

func watchTicks(ctx context.Context, t *testing.T, c *launcher.Client) *ticks {
	t.Helper()
	var console interface {
		Read([]byte) (int, error)
		Close() error
	}
	var err error
	for i := 0; i < 50; i++ {
		if console, err = c.Console(ctx, true); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	tk := &ticks{seen: make(chan struct{}, 1)}
	go func() {
		defer console.Close()
		sc := bufio.NewScanner(console)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "TICK" {
				if v, err := strconv.ParseFloat(f[1], 64); err == nil {
					tk.mu.Lock()
					if v > tk.max {
						tk.max = v
					}
					tk.mu.Unlock()
					select {
					case tk.seen <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	return tk
}

func (tk *ticks) last() float64 {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.max
}

func (tk *ticks) waitAbove(t *testing.T, v float64, timeout time.Duration, what string) float64 {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if m := tk.last(); m > v {
			return m
		}
		select {
		case <-tk.seen:
		case <-deadline:
			t.Fatalf("waiting %v for %s: uptime %.2f, want above %.2f", timeout, what, tk.last(), v)
		}
	}
}

// tickerInitramfs is the idle guest's initramfs with an /init that prints
// "TICK <uptime>" on the console every second: Linux unpacks concatenated
// archives in order, so a second archive replaces /init.
func tickerInitramfs(t *testing.T, idle string) string {
	t.Helper()
	base, err := os.ReadFile(idle)
	if err != nil {
		t.Fatal(err)
	}
	init := "#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\n" +
		"echo \"GUEST-BOOTED uptime=$(/bin/busybox cat /proc/uptime)\"\n" +
		"while :; do read up idle </proc/uptime; echo \"TICK $up\"; /bin/busybox sleep 1; done\n"
	var cpio bytes.Buffer
	writeNewc(&cpio, "init", 0o100755, []byte(init))
	writeNewc(&cpio, "TRAILER!!!", 0, nil)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(cpio.Bytes())
	_ = w.Close()
	f, err := os.CreateTemp("/tmp", "vmkmig-ticker-*.cpio.gz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	_, err = f.Write(append(base, gz.Bytes()...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// writeNewc writes one entry of a cpio archive in the "newc" format the
// kernel's initramfs unpacker reads.
func writeNewc(w *bytes.Buffer, name string, mode uint32, data []byte) {
	fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	w.WriteString(name)
	w.WriteByte(0)
	for w.Len()%4 != 0 {
		w.WriteByte(0)
	}
	w.Write(data)
	for w.Len()%4 != 0 {
		w.WriteByte(0)
	}
}

// migrationTLS is a CA with the node agents' server and client
// certificates, as the installation's (installstrategy.EnsureCertificates).
func migrationTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubevirt.io"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(serial int64, cn string, dns []string, usage x509.ExtKeyUsage) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: dns, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	server = &tls.Config{Certificates: []tls.Certificate{leaf(2, "kubevirt.io:system:node:virt-handler", []string{"virt-handler"}, x509.ExtKeyUsageServerAuth)},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{leaf(3, "kubevirt.io:system:client:virt-handler", nil, x509.ExtKeyUsageClientAuth)},
		RootCAs: pool, ServerName: "virt-handler", MinVersion: tls.VersionTLS12}
	return server, client
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
