package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestNewSessionDefaultsAndURI(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/x")
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	s, err := newSession("/var/run/kubevirt-private")
	if err != nil {
		t.Fatal(err)
	}
	if want := (session{runtimeDir: "/run/x", configHome: "/var/run/kubevirt-private", cacheHome: "/var/run/kubevirt-private"}); s != want {
		t.Errorf("session %+v, want %+v", s, want)
	}
	if got := os.Getenv("XDG_CONFIG_HOME"); got != "/var/run/kubevirt-private" {
		t.Errorf("XDG_CONFIG_HOME=%q: the daemons would not inherit the default", got)
	}
	if got, want := s.uri(), "qemu+unix:///session?socket=/run/x/libvirt/libvirt-sock"; got != want {
		t.Errorf("uri %q, want %q", got, want)
	}
	t.Setenv("XDG_CACHE_HOME", "relative")
	if _, err := newSession("/p"); err == nil || !strings.Contains(err.Error(), "XDG_CACHE_HOME") {
		t.Errorf("a relative XDG_CACHE_HOME: error %v, want one naming it", err)
	}
}

// nobody is the unprivileged user the launcher runs as in
// TestNonRootLauncherBootsGuest: any user other than root puts
// virt-launcher in session mode; libvirt needs the user in /etc/passwd,
// which the host has for nobody (the launcher image has the qemu user 107).
const nobody = 65534

// TestNonRootLauncherBootsGuest runs the real virt-launcher binary as an
// unprivileged user without --libvirt-uri, as the default launcher pod
// does: it must start virtlogd and libvirtd in session mode, and the
// domain it defines must boot the test guest with QEMU running as that
// user.
func TestNonRootLauncherBootsGuest(t *testing.T) {
	nl := startNonRootLauncher(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dirs := nl.dirs
	log, _ := os.ReadFile(nl.logPath)
	if want := "qemu+unix:///session?socket=" + dirs["run"] + "/libvirt/libvirt-sock"; !strings.Contains(string(log), want) {
		t.Errorf("the launcher log does not show libvirt at %s:\n%s", want, log)
	}
	nl.boot(ctx, t)

	pids := qemuPIDs(t, nl.ns)
	if len(pids) != 1 {
		t.Fatalf("%d QEMU processes of domain %s_tiny, want 1", len(pids), nl.ns)
	}
	if u := procUID(t, pids[0]); u != nobody {
		t.Errorf("QEMU runs as uid %d, want the launcher's %d", u, nobody)
	}

	nl.shutdown(ctx, t)
	final, err := client.ReadFinal(dirs["share"], nl.uid)
	if err != nil {
		t.Fatal(err)
	}
	if !final.Succeeded() {
		t.Errorf("final status %+v, want a clean end", final)
	}
}

// nonRootLauncher is a virt-launcher binary running as nobody with its own
// libvirt (startNonRootLauncher), serving its command socket.
type nonRootLauncher struct {
	c       *client.Client
	dirs    map[string]string
	uid, ns string
	guest   libvirtenv.Guest
	logPath string
	bin     string
	exited  chan error // the launcher's exit; put the value back after reading it
	start   time.Time
}

// startNonRootLauncher builds virt-launcher and runs it as nobody without
// --libvirt-uri, as the default launcher pod does; it returns once the
// command socket answers. Cleanup stops it and kills any QEMU left.
func startNonRootLauncher(t *testing.T, args ...string) *nonRootLauncher {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test starts virt-launcher as another user: run it as root")
	}
	for _, bin := range []string{"libvirtd", "virtlogd", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := exec.LookPath("/usr/sbin/" + bin); err != nil {
				t.Fatalf("%s not found: install libvirt and QEMU with hack/setup-libvirt.sh", bin)
			}
		}
	}
	guest := libvirtenv.RequireGuest(t)

	// A world-traversable base: t.TempDir's parents are root's alone. Its
	// private directory's path is as long as the pod's
	// (/var/run/kubevirt-private), since libvirt's session keeps the guest
	// agent's socket under it and UNIX socket paths are short.
	base, err := os.MkdirTemp("", "vmkit-nr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "virt-launcher")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building virt-launcher (needs libvirt-dev and pkg-config: make test-deps): %v\n%s", err, out)
	}
	uid := types.UID(uuid.NewUUID())
	dirs := map[string]string{}
	for _, d := range []string{"share", "eph", "cd", "p", "run"} {
		dirs[d] = filepath.Join(base, d)
	}
	kb := filepath.Join(dirs["cd"], string(uid), "kernel-boot")
	for _, d := range append([]string{kb}, dirs["share"], dirs["eph"], dirs["p"], dirs["run"]) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{guest.Kernel, guest.IdleInitramfs} {
		copyTo(t, f, filepath.Join(kb, filepath.Base(f)))
	}
	// What the pod's volumes are to the qemu user: its own.
	if err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}

	ns := "nonroot-" + string(uid)[:8]
	logPath := filepath.Join(base, "launcher.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--name", "tiny", "--uid", string(uid), "--namespace", ns,
		"--kubevirt-share-dir", dirs["share"], "--ephemeral-disk-dir", dirs["eph"],
		"--container-disk-dir", dirs["cd"], "--private-dir", dirs["p"],
		"--use-emulation", "--qemu-timeout", "120s", "--grace-period-seconds", "5")
	cmd.Args = append(cmd.Args, args...)
	// XDG_CONFIG_HOME and XDG_CACHE_HOME unset: the launcher defaults them
	// to its private directory, as the pod sets them.
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "XDG_RUNTIME_DIR=" + dirs["run"]}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		for _, pid := range qemuPIDs(t, ns) { // QEMU dies with its libvirtd; make sure
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("launcher log:\n%s", b)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := client.New(client.SocketPath(dirs["share"], string(uid)))
	t.Cleanup(c.Close)
	start := time.Now()
	for {
		if _, err := c.Ping(ctx); err == nil {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("virt-launcher exited before serving: %v", err)
		case <-ctx.Done():
			t.Fatal("virt-launcher did not serve its socket within 3 minutes")
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("serving after %v", time.Since(start).Round(time.Millisecond))
	return &nonRootLauncher{c: c, dirs: dirs, uid: string(uid), ns: ns, guest: guest, logPath: logPath, bin: bin, exited: exited, start: start}
}

// boot syncs the tiny guest, changed by mutate, and waits until its
// console shows it booted; it returns the console's lines until then.
func (nl *nonRootLauncher) boot(ctx context.Context, t *testing.T, mutate ...func(*v1.VirtualMachineInstance)) []string {
	t.Helper()
	c, ns, uid, guest, start := nl.c, nl.ns, types.UID(nl.uid), nl.guest, nl.start

	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tiny", UID: uid},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Machine: &v1.Machine{Type: "pc"},
			Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
				KernelArgs: "console=ttyS0 panic=-1 quiet",
				Container: &v1.KernelBootContainer{
					Image: "vmkit/tiny-guest", KernelPath: "/boot/" + filepath.Base(guest.Kernel), InitrdPath: "/boot/" + filepath.Base(guest.IdleInitramfs),
				},
			}},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			Devices:   v1.Devices{AutoattachMemBalloon: v1.BoolPtr(false), AutoattachPodInterface: v1.BoolPtr(false)},
		}},
	}
	for _, m := range mutate {
		m(vmi)
	}
	st, err := c.Sync(ctx, vmi)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if !st.Started {
		t.Fatalf("sync: the domain did not start: %+v", st)
	}
	console, err := c.Console(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	booted := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(console)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "GUEST-BOOTED") {
				booted <- lines
				return
			}
		}
		close(booted)
	}()
	defer console.Close()
	select {
	case lines, ok := <-booted:
		if !ok {
			t.Fatal("the console closed before the guest booted")
		}
		t.Logf("guest booted %v after the launcher started: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(lines[len(lines)-1]))
		return lines
	case <-ctx.Done():
		t.Fatal("the guest did not boot")
	}
	return nil
}

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// qemuPIDs are the QEMU processes of the domain <ns>_tiny.
func qemuPIDs(t *testing.T, ns string) []int {
	return pidsOf(t, func(args []string, cmdline string) bool {
		return strings.Contains(cmdline, "qemu-system") && strings.Contains(cmdline, "guest="+ns+"_tiny")
	})
}

// pidsOf are the processes whose command line (its arguments, and them
// joined by NULs) match says are wanted.
func pidsOf(t *testing.T, match func(args []string, cmdline string) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(strings.Split(string(b), "\x00"), string(b)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// shutdown shuts the guest down through the launcher's socket and waits
// until virt-launcher has exited, failing the test if it exits with an
// error or not before ctx ends.
func (nl *nonRootLauncher) shutdown(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := nl.c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-nl.exited:
		nl.exited <- err
		if err != nil {
			t.Errorf("virt-launcher: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("virt-launcher did not exit after the shutdown")
	}
}

// procUID is the real user of a process.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			u, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}
