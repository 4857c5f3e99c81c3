// Package podsim runs launchers the way launcher pods run them, on one
// machine, for tests of live migration: each "pod" is a mount namespace
// in which the pod's own directory is mounted at the same path (Root), as
// every launcher pod has /var/run/kubevirt; with its own device nodes for
// /dev/kvm, /dev/net/tun and /dev/vhost-net, as a container has (the node
// agent chowns them for a non-root launcher); with its own /etc/passwd
// holding KubeVirt's qemu user (uid 107); running its own libvirtd in
// session mode as that user (a non-root launcher, as KubeVirt's) with its
// own host UUID (libvirt refuses to migrate to the same host); and
// virt-launcher as that user. A node agent reaches a pod's sockets through
// /proc/<launcher pid>/root, as on a real node.
//
// It also provides the tiny guest's ticking initramfs (TickerInitramfs:
// "TICK <uptime>" on the console every second, to tell that a migrated
// guest is the same one) and a CA with node agent certificates (TLS).
package podsim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/pki"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const (
	// Root is where each pod's directory is mounted in its namespace.
	Root = "/run/vmkmig"
	// QEMUUID is KubeVirt's non-root launcher user.
	QEMUUID = 107
)

// Require fails the test, naming the command that installs them, when
// the tools pods need are missing or the test does not run as root.
func Require(t testing.TB) libvirtenv.Guest {
	t.Helper()
	for _, tool := range []string{"libvirtd", "setpriv", "qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make test-deps installs libvirt and QEMU: hack/setup-libvirt.sh)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("launcher pods run in their own mount namespaces and as uid 107: run this test as root")
	}
	return libvirtenv.RequireGuest(t)
}

// Base makes the directory pods live in (removed at the end of the test)
// with a virt-launcher built from this module, and the mount point Root.
func Base(t testing.TB) (dir, launcherBinary string) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("/tmp", "vmkmig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	keepHostDevices(t)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "virt-launcher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/virt-launcher")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building virt-launcher (needs libvirt-dev and pkg-config: make test-deps): %v\n%s", err, out)
	}
	// Root stays (an empty directory on /run's tmpfs): tests of other
	// packages that run at the same time (go test ./... runs packages in
	// parallel) mount their pods' directories there, and removing it under
	// them made their launchers fail with "mkdir /run/vmkmig: permission
	// denied".
	if err := os.MkdirAll(Root, 0o755); err != nil {
		t.Fatal(err)
	}
	return base, bin
}

// launcherDevices are the device nodes a launcher pod gets from the device
// plugins (/dev/kvm, /dev/net/tun, /dev/vhost-net), which the node agent
// chowns to a non-root launcher's user.
var launcherDevices = []string{"kvm", "net/tun", "vhost-net"}

// keepHostDevices fails the test if, when it ends, the host's nodes of
// launcherDevices have another owner or mode than at its start (and puts
// them back): each pod has its own nodes, as a container does, and what
// the node agent does to a pod's must not reach the host's.
func keepHostDevices(t testing.TB) {
	t.Helper()
	before := map[string]unix.Stat_t{}
	for _, d := range launcherDevices {
		var st unix.Stat_t
		if unix.Stat("/dev/"+d, &st) == nil {
			before[d] = st
		}
	}
	t.Cleanup(func() {
		for d, was := range before {
			var st unix.Stat_t
			if err := unix.Stat("/dev/"+d, &st); err != nil {
				t.Errorf("the host's /dev/%s: %v", d, err)
				continue
			}
			if st.Uid != was.Uid || st.Gid != was.Gid || st.Mode != was.Mode {
				t.Errorf("the host's /dev/%s changed: owner %d:%d mode %o, was %d:%d mode %o (put back)", d, st.Uid, st.Gid, st.Mode&0o7777, was.Uid, was.Gid, was.Mode&0o7777)
				_ = unix.Chown("/dev/"+d, int(was.Uid), int(was.Gid))
				_ = unix.Chmod("/dev/"+d, was.Mode&0o7777)
			}
		}
	})
}

// podDevices makes the pod's own nodes of launcherDevices that the host
// has, under dir/dev, with the host's numbers, owner and mode, as a
// container runtime does, and returns the shell commands that mount them
// over the host's in the pod's mount namespace.
func podDevices(dir string) (string, error) {
	var mounts string
	for _, d := range launcherDevices {
		var st unix.Stat_t
		if err := unix.Stat("/dev/"+d, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			continue
		}
		own := filepath.Join(dir, "dev", d)
		if err := os.MkdirAll(filepath.Dir(own), 0o755); err != nil {
			return "", err
		}
		if err := unix.Mknod(own, st.Mode, int(st.Rdev)); err != nil {
			return "", fmt.Errorf("mknod %s: %w", own, err)
		}
		if err := unix.Chown(own, int(st.Uid), int(st.Gid)); err != nil {
			return "", err
		}
		if err := unix.Chmod(own, st.Mode&0o7777); err != nil { // mknod applied the umask
			return "", err
		}
		mounts += "mount --bind " + shellQuote(own) + " /dev/" + d + " && "
	}
	return mounts, nil
}

// DevicesNotGiven lists the pod's device nodes (launcherDevices the host
// has) that are not owned by the launcher's user: the node agent gives
// them to a non-root launcher before its QEMU starts.
func (p *Pod) DevicesNotGiven() []string {
	var not []string
	for _, d := range launcherDevices {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(p.Dir, "dev", d), &st); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				not = append(not, fmt.Sprintf("/dev/%s (%v)", d, err))
			}
			continue
		}
		if st.Uid != QEMUUID || st.Gid != QEMUUID {
			not = append(not, fmt.Sprintf("/dev/%s (owner %d:%d)", d, st.Uid, st.Gid))
		}
	}
	return not
}

// Pod is one launcher pod: its libvirtd and virt-launcher.
type Pod struct {
	Name string
	// Dir is the pod's directory on the host (Root inside).
	Dir string
	// Done is closed when the launcher exited, with Err.
	Done chan struct{}
	Err  error
	// Client talks to the launcher.
	Client *client.Client

	cmd  *exec.Cmd
	logs *bytes.Buffer
	mu   sync.Mutex
	// mntNS names the pod's mount namespace (/proc/<pid>/ns/mnt), which
	// its libvirtd and QEMU share.
	mntNS string
}

// VMI is the tiny guest with an empty disk (so a migration copies a
// local disk: block migration) and the ticking initramfs, without a network.
func VMI(uid types.UID) *v1.VirtualMachineInstance {
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

// Start prepares a pod directory under base and starts its libvirtd and
// launcher for vmi; the test's end stops them.
func Start(t testing.TB, base, name, bin string, vmi *v1.VirtualMachineInstance, kernel, initrd string) *Pod {
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
	for _, f := range []struct{ name, line string }{{"passwd", "qemu:x:107:107:qemu user:" + Root + "/home:/usr/sbin/nologin\n"}, {"group", "qemu:x:107:\n"}} {
		b, err := os.ReadFile("/etc/" + f.name)
		must(err)
		must(os.WriteFile(filepath.Join(dir, f.name), append(b, f.line...), 0o644))
	}
	must(filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, QEMUUID, QEMUUID)
	}))
	must(os.Chmod(filepath.Join(dir, "run"), 0o700))
	devices, err := podDevices(dir)
	must(err)

	uri := "qemu+unix:///session?socket=" + Root + "/run/libvirt/libvirt-sock"
	launcherArgs := []string{bin, "--name", vmi.Name, "--uid", string(vmi.UID), "--namespace", vmi.Namespace,
		"--kubevirt-share-dir", Root + "/share", "--ephemeral-disk-dir", Root + "/eph",
		"--container-disk-dir", Root + "/cd", "--private-dir", Root + "/priv",
		"--qemu-timeout", "5m", "--grace-period-seconds", "5", "--use-emulation", "--force-emulation",
		"--libvirt-uri", uri}
	// Inside the pod: libvirtd in the background (under the launcher's
	// reaper), then the launcher.
	inner := fmt.Sprintf("libvirtd --pid-file %[1]s/libvirtd.pid >%[1]s/libvirtd.log 2>&1 & "+
		"i=0; while [ ! -S %[1]s/run/libvirt/libvirt-sock ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exec %[2]s",
		Root, shellJoin(launcherArgs))
	script := devices + fmt.Sprintf("mount --bind %[1]s/passwd /etc/passwd && mount --bind %[1]s/group /etc/group && mount --bind %[1]s %[2]s && "+
		"exec setpriv --reuid=%[3]d --regid=%[3]d --clear-groups env -i PATH=%[4]s HOME=%[2]s/home XDG_RUNTIME_DIR=%[2]s/run "+
		"XDG_CONFIG_HOME=%[2]s/config XDG_CACHE_HOME=%[2]s/cache %[5]s --reap sh -c %[6]s",
		dir, Root, QEMUUID, os.Getenv("PATH"), bin, shellQuote(inner))
	p := &Pod{Name: name, Dir: dir, Done: make(chan struct{}), logs: &bytes.Buffer{}}
	p.cmd = exec.Command("sh", "-c", script)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
	p.cmd.Stdout, p.cmd.Stderr = (*lockedWriter)(p), (*lockedWriter)(p)
	must(p.cmd.Start())
	// Start returns once the child unshared its mount namespace and ran sh.
	p.mntNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", p.cmd.Process.Pid))
	go func() { p.Err = p.cmd.Wait(); close(p.Done) }()
	t.Cleanup(func() { p.Stop(t) })
	p.Client = client.New(filepath.Join(dir, "share", "sockets", string(vmi.UID), client.SocketFile))
	return p
}

type lockedWriter Pod

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logs.Write(b)
}

// Log is the launcher's output and the end of libvirtd's log, of each
// domain's QEMU log and of the serial console's log.
func (p *Pod) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	libvirtd, _ := os.ReadFile(filepath.Join(p.Dir, "libvirtd.log"))
	out := p.logs.String() + "\n--- libvirtd ---\n" + lastLines(string(libvirtd), 30)
	qemuLogs, _ := filepath.Glob(filepath.Join(p.Dir, "cache", "libvirt", "qemu", "log", "*.log"))
	serialLogs, _ := filepath.Glob(filepath.Join(p.Dir, "priv", "*", "virt-serial0-log"))
	for _, f := range append(qemuLogs, serialLogs...) {
		b, _ := os.ReadFile(f)
		out += "\n--- " + filepath.Base(f) + " ---\n" + lastLines(string(b), 30)
	}
	return out
}

// stop ends what the pod started: the launcher (SIGTERM, then SIGKILL to
// its process group), the domains its libvirtd still runs, then libvirtd.
// Stop ends what the pod started (the test's end calls it).
func (p *Pod) Stop(t testing.TB) {
	select {
	case <-p.Done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.Done
		}
	}
	b, err := os.ReadFile(filepath.Join(p.Dir, "libvirtd.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	// QEMU processes of this libvirtd (children of the pod's reaper, then
	// of init): find them by their pid files in the pod's run directory.
	qemus, _ := filepath.Glob(filepath.Join(p.Dir, "run", "libvirt", "qemu", "run", "*.pid"))
	for _, f := range qemus {
		if b, err := os.ReadFile(f); err == nil {
			q, err := strconv.Atoi(strings.TrimSpace(string(b)))
			// Only a QEMU of this pod: the pid file may be stale and its
			// PID another process's now (pid_max is 32768 on these
			// machines), say a QEMU of another pod, whose command line
			// names the same paths under Root. Only this pod's processes
			// share its mount namespace.
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", q))
			ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", q))
			if err == nil && q > 1 && p.mntNS != "" && ns == p.mntNS && bytes.Contains(cmdline, []byte("qemu")) {
				t.Logf("pod %s: killing the leftover QEMU %d", p.Name, q)
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

// Sync sends vmi to the pod's launcher, retrying while its socket is not
// up yet.
func Sync(ctx context.Context, t testing.TB, p *Pod, vmi *v1.VirtualMachineInstance) client.Status {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := p.Client.Sync(ctx, vmi)
		if err == nil {
			return st
		}
		if time.Now().After(deadline) || !client.IsGone(err) {
			t.Fatalf("pod %s: sync: %v; log:\n%s", p.Name, err, p.Log())
		}
		select {
		case <-p.Done:
			t.Fatalf("pod %s exited: %v; log:\n%s", p.Name, p.Err, p.Log())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitStatus polls the launcher until cond holds.
func WaitStatus(ctx context.Context, t testing.TB, c *client.Client, timeout time.Duration, what string, cond func(client.Status) bool) client.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last client.Status
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

// FailIfMigrationFailed ends the test when the source reports its
// migration failed (it is not aborted in these waits).
func FailIfMigrationFailed(ctx context.Context, t testing.TB, src *Pod) {
	t.Helper()
	st, err := src.Client.State(ctx)
	if err == nil && st.Migration != nil && st.Migration.Failed && st.Migration.AbortStatus == "" {
		t.Fatalf("the migration failed: %s\nsource log:\n%s", st.Migration.FailureReason, src.Log())
	}
}

// ProcRoot is the launcher's root directory as the node agent reaches it.
func ProcRoot(ctx context.Context, t testing.TB, c *client.Client) string {
	t.Helper()
	pid, err := c.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/proc/%d/root", pid)
}

// Ticks follows "TICK <uptime>" lines on a launcher's console.
type Ticks struct {
	mu   sync.Mutex
	max  float64
	seen chan struct{}
	// tail is the end of what the console printed, for failure messages.
	tail []byte
	// ended is why the console stopped (io.EOF when it closed); nil while
	// it is open.
	ended error
}

// tickTail is how much of the console a failure message shows.
const tickTail = 2048

// WatchTicks follows the launcher's console (with its history).
func WatchTicks(ctx context.Context, t testing.TB, c *client.Client) *Ticks {
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
	tk := &Ticks{seen: make(chan struct{}, 1)}
	go func() {
		defer console.Close()
		sc := bufio.NewScanner(console)
		for sc.Scan() {
			line := sc.Bytes()
			tk.mu.Lock()
			tk.tail = append(tk.tail, line...)
			tk.tail = append(tk.tail, '\n')
			if over := len(tk.tail) - tickTail; over > 0 {
				tk.tail = tk.tail[over:]
			}
			f := strings.Fields(string(line))
			if len(f) == 2 && f[0] == "TICK" {
				if v, err := strconv.ParseFloat(f[1], 64); err == nil && v > tk.max {
					tk.max = v
				}
			}
			tk.mu.Unlock()
			select {
			case tk.seen <- struct{}{}:
			default:
			}
		}
		tk.mu.Lock()
		tk.ended = sc.Err()
		if tk.ended == nil {
			tk.ended = io.EOF
		}
		tk.mu.Unlock()
		select {
		case tk.seen <- struct{}{}:
		default:
		}
	}()
	return tk
}

// Describe says what the console printed last and whether it ended.
func (tk *Ticks) Describe() string {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	state := "still open"
	if tk.ended != nil {
		state = "ended: " + tk.ended.Error()
	}
	return fmt.Sprintf("the console is %s; its last %d bytes:\n%s", state, len(tk.tail), tk.tail)
}

// Last is the highest uptime seen.
func (tk *Ticks) Last() float64 {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.max
}

// WaitAbove waits for an uptime above v.
func (tk *Ticks) WaitAbove(t testing.TB, v float64, timeout time.Duration, what string) float64 {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if m := tk.Last(); m > v {
			return m
		}
		tk.mu.Lock()
		ended := tk.ended != nil
		tk.mu.Unlock()
		if ended {
			t.Fatalf("waiting for %s: uptime %.2f, want above %.2f; %s", what, tk.Last(), v, tk.Describe())
		}
		select {
		case <-tk.seen:
		case <-deadline:
			t.Fatalf("waiting %v for %s: uptime %.2f, want above %.2f; %s", timeout, what, tk.Last(), v, tk.Describe())
		}
	}
}

// TickerInitramfs is the idle guest's initramfs with an /init that prints
// "TICK <uptime>" on the console every second: Linux unpacks concatenated
// archives in order, so a second archive replaces /init.
func TickerInitramfs(t testing.TB, idle string) string {
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

// TLS is a CA with the node agents' server and client
// certificates, as the installation's (installstrategy.EnsureCertificates).
func TLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	now := time.Now()
	ca, caKey, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kubevirt.io"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(cn string, dns []string, usage x509.ExtKeyUsage) tls.Certificate {
		cert, key, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}, ca, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key}
	}
	server = &tls.Config{Certificates: []tls.Certificate{leaf("kubevirt.io:system:node:virt-handler", []string{"virt-handler"}, x509.ExtKeyUsageServerAuth)},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{leaf("kubevirt.io:system:client:migration-proxy", nil, x509.ExtKeyUsageClientAuth)},
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
