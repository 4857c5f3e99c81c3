// Package localnode stands in for a kubelet so a machine without one can run
// vmkit's VMs: local runs (`make demo`) and integration tests. It is not part
// of a deployment; on a real cluster the kubelet and the container runtime do
// this work.
//
// A [Node] watches (by polling) the launcher pods (label
// kubevirt.io=virt-launcher) and does for each what the kubelet would:
//
//   - binds pods that have no node yet to the node it plays;
//   - runs the compute container's command line (Command[1:] + Args) as a
//     local virt-launcher process, mapping the pod's directories to
//     directories under BaseDir (as emptyDirs would be), adding
//     --private-dir and --libvirt-uri, and linking the tiny guest's
//     kernel-boot files (the idle initramfs, and the one with a QEMU guest
//     agent when built) into <container-disk-dir>/<vmi uid>/kernel-boot/
//     (the work of the kernel-boot container in a real pod);
//   - reports the pod Running with a ready compute container;
//   - when the process exits, reports the pod Succeeded or Failed and
//     destroys whatever domain of the VMI is left in libvirt (in a pod, QEMU
//     ends with its container; with a node's libvirt it would not);
//   - when the pod is being deleted, sends the launcher SIGTERM, waits for it
//     to exit, then deletes the pod with grace period 0.
//
// The package runs the virt-launcher binary and uses no cgo; libvirt is only
// reached through the [Domains] interface or the virsh command.
package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Files of the tiny test guest (hack/make-guest.sh) that a Node links into
// every launcher's kernel-boot directory, so a VMI's kernel boot container
// finds them at /boot/<name> (KernelPath "/boot/vmlinux", InitrdPath
// "/boot/initramfs-idle.cpio.gz" or "/boot/initramfs-agent.cpio.gz").
const (
	// Kernel is the uncompressed kernel.
	Kernel = "vmlinux"
	// IdleInitramfs prints GUEST-BOOTED on the serial console and idles.
	IdleInitramfs = "initramfs-idle.cpio.gz"
	// AgentInitramfs is IdleInitramfs plus a QEMU guest agent (qemu-ga)
	// started right after GUEST-BOOTED. Optional: linked when GuestDir
	// holds it.
	AgentInitramfs = "initramfs-agent.cpio.gz"
)

// guestFiles must be in GuestDir; optionalGuestFiles are linked when they are.
var (
	guestFiles         = []string{Kernel, IdleInitramfs}
	optionalGuestFiles = []string{AgentInitramfs}
)

// Domains is what a Node needs from the node's hypervisor: find the domains
// of a VMI and remove them. hypervisor.Hypervisor satisfies it.
type Domains interface {
	List(ctx context.Context, vmiUID string) ([]hypervisor.Domain, error)
	Destroy(ctx context.Context, name string) error
	Undefine(ctx context.Context, name string) error
}

// Options configure a Node.
type Options struct {
	// Kube reads, binds, updates and deletes the launcher pods.
	Kube kubernetes.Interface
	// NodeName is the Node the pods are bound to and run on.
	NodeName string
	// Namespace limits the Node to the pods of one namespace; all when empty.
	Namespace string
	// LauncherBinary is the virt-launcher executable (go build ./cmd/virt-launcher).
	LauncherBinary string
	// LibvirtURI is passed to every launcher as --libvirt-uri
	// (default qemu:///system).
	LibvirtURI string
	// ForceEmulation passes --force-emulation to every launcher: guests run
	// under TCG even where the node's libvirt offers KVM. Launcher pods see
	// /dev/kvm only when they request it, but local launchers share the
	// node's libvirt, and some machines advertise a /dev/kvm that does not
	// run guests (a nested or paravirtual shim).
	ForceEmulation bool
	// GuestDir holds the tiny guest's vmlinux and initramfs-idle.cpio.gz
	// (required) and initramfs-agent.cpio.gz (when present), linked into
	// each launcher's container-disk directory (see Kernel, IdleInitramfs,
	// AgentInitramfs).
	GuestDir string
	// BaseDir is where the launchers' directories go: <BaseDir>/share (the
	// agent's share dir, see ShareDir) and <BaseDir>/pods/<pod>. Keep it short:
	// UNIX socket paths under it must stay below 108 bytes. When empty, Start
	// creates /tmp/vmkXXXX and Stop removes it.
	BaseDir string
	// Domains finds and removes domains left behind by a launcher; when nil,
	// Node runs `virsh -c LibvirtURI` instead.
	Domains Domains
	// Interval between two passes over the pods (default 100ms).
	Interval time.Duration
}

// Node plays the kubelet for one node. Create it with Start; Stop it.
type Node struct {
	opts    Options
	ownsDir bool
	share   string
	// guest are the names of the guest files linked for each launcher.
	guest  []string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	procs map[types.UID]*Launcher // by pod UID
	errs  []error
}

// Launcher is one virt-launcher process started for a pod.
type Launcher struct {
	// VMIUID is the UID of the VMI the launcher runs.
	VMIUID types.UID
	// PodName is the launcher pod's name.
	PodName string
	// PodDir holds the pod's directories: eph, cd, priv (and launcher.log).
	PodDir string
	// LogPath is the launcher's combined stdout and stderr.
	LogPath string
	// Started is when the process started.
	Started time.Time

	cmd    *exec.Cmd
	ns     string
	name   string
	done   chan struct{}
	termed bool
}

// Done is closed when the process has exited.
func (l *Launcher) Done() <-chan struct{} { return l.done }

// Exited reports whether the process has exited.
func (l *Launcher) Exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// ExitCode is the process's exit code, -1 while it runs or when killed by a signal.
func (l *Launcher) ExitCode() int {
	if !l.Exited() {
		return -1
	}
	return l.cmd.ProcessState.ExitCode()
}

// Kill kills the process at once, as a crashing container would end.
func (l *Launcher) Kill() error { return l.cmd.Process.Kill() }

// Pid is the process ID.
func (l *Launcher) Pid() int { return l.cmd.Process.Pid }

// Start checks opts, creates the directories and starts the loop that plays
// the kubelet. It returns once the loop runs; ctx only carries the logger.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if opts.Kube == nil || opts.NodeName == "" || opts.LauncherBinary == "" || opts.GuestDir == "" {
		return nil, errors.New("localnode: Kube, NodeName, LauncherBinary and GuestDir are required")
	}
	if opts.LibvirtURI == "" {
		opts.LibvirtURI = "qemu:///system"
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if _, err := os.Stat(opts.LauncherBinary); err != nil {
		return nil, fmt.Errorf("localnode: virt-launcher binary: %w (go build -o %s ./cmd/virt-launcher)", err, opts.LauncherBinary)
	}
	for _, f := range guestFiles {
		if fi, err := os.Stat(filepath.Join(opts.GuestDir, f)); err != nil || fi.Size() == 0 {
			return nil, fmt.Errorf("localnode: guest file %s missing in %s (build it with hack/make-guest.sh)", f, opts.GuestDir)
		}
	}
	if opts.Domains == nil {
		if _, err := exec.LookPath("virsh"); err != nil {
			return nil, fmt.Errorf("localnode: no Domains given and virsh not found: %w (hack/setup-libvirt.sh)", err)
		}
	}
	n := &Node{opts: opts, procs: map[types.UID]*Launcher{}, done: make(chan struct{}), guest: guestFiles}
	for _, f := range optionalGuestFiles {
		if fi, err := os.Stat(filepath.Join(opts.GuestDir, f)); err == nil && fi.Size() > 0 {
			n.guest = append(n.guest, f)
		}
	}
	if opts.BaseDir == "" {
		dir, err := os.MkdirTemp("", "vmk")
		if err != nil {
			return nil, fmt.Errorf("localnode: %w", err)
		}
		n.opts.BaseDir, n.ownsDir = dir, true
	}
	n.share = filepath.Join(n.opts.BaseDir, "share")
	if err := os.MkdirAll(n.share, 0o755); err != nil {
		return nil, fmt.Errorf("localnode: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	go func() {
		defer close(n.done)
		for lctx.Err() == nil {
			n.step(lctx)
			select {
			case <-lctx.Done():
			case <-time.After(opts.Interval):
			}
		}
	}()
	return n, nil
}

// ShareDir is the launchers' --kubevirt-share-dir: give it to the node agent
// (nodeagent.Config.ShareDir, virt-handler --kubevirt-share-dir).
func (n *Node) ShareDir() string { return n.share }

// GuestFiles names the guest files linked into every launcher's kernel-boot
// directory: Kernel and IdleInitramfs, and AgentInitramfs when GuestDir
// holds it.
func (n *Node) GuestFiles() []string { return append([]string(nil), n.guest...) }

// BaseDir is the root of the Node's directories.
func (n *Node) BaseDir() string { return n.opts.BaseDir }

// Launcher returns the most recent launcher process of a VMI, nil if none.
func (n *Node) Launcher(vmiUID types.UID) *Launcher {
	n.mu.Lock()
	defer n.mu.Unlock()
	var last *Launcher
	for _, p := range n.procs {
		if p.VMIUID == vmiUID && (last == nil || p.Started.After(last.Started)) {
			last = p
		}
	}
	return last
}

// Logs returns the last lines of every launcher's log, for failure messages.
func (n *Node) Logs(lines int) string {
	n.mu.Lock()
	procs := make([]*Launcher, 0, len(n.procs))
	for _, p := range n.procs {
		procs = append(procs, p)
	}
	n.mu.Unlock()
	sort.Slice(procs, func(i, j int) bool { return procs[i].Started.Before(procs[j].Started) })
	var b strings.Builder
	for _, p := range procs {
		out, _ := os.ReadFile(p.LogPath)
		fmt.Fprintf(&b, "--- launcher of VMI %s (pod %s, %s):\n%s\n", p.VMIUID, p.PodName, p.PodDir, tail(string(out), lines))
	}
	return b.String()
}

// Stop ends the loop, kills the launchers still running, removes their
// domains, and removes BaseDir if Start created it. It returns the errors
// met while playing the kubelet (launchers that could not start, pods that
// could not be updated), joined.
func (n *Node) Stop() error {
	n.cancel()
	<-n.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n.mu.Lock()
	procs := n.procs
	n.procs = map[types.UID]*Launcher{}
	errs := n.errs
	n.mu.Unlock()
	for _, p := range procs {
		if !p.Exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if err := n.containerGone(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	if n.ownsDir {
		if err := os.RemoveAll(n.opts.BaseDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (n *Node) fail(err error) {
	n.mu.Lock()
	n.errs = append(n.errs, err)
	n.mu.Unlock()
}

// step does what the kubelet would do for each launcher pod.
func (n *Node) step(ctx context.Context) {
	log := klog.FromContext(ctx).WithName("localnode")
	pods, err := n.opts.Kube.CoreV1().Pods(n.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtLauncherValue})
	if err != nil {
		log.V(2).Info("listing launcher pods", "err", err)
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != n.opts.NodeName {
			continue
		}
		podsAPI := n.opts.Kube.CoreV1().Pods(pod.Namespace)
		n.mu.Lock()
		proc := n.procs[pod.UID]
		n.mu.Unlock()
		exited := proc != nil && proc.Exited()
		switch {
		case pod.DeletionTimestamp != nil:
			if proc != nil && !exited && !proc.termed {
				proc.termed = true
				_ = proc.cmd.Process.Signal(syscall.SIGTERM)
			}
			if proc == nil || exited {
				if proc != nil {
					if err := n.containerGone(ctx, proc); err != nil {
						n.fail(err)
					}
				}
				zero := int64(0)
				_ = podsAPI.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		case pod.Spec.NodeName == "":
			_ = podsAPI.Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
				Target:     corev1.ObjectReference{Kind: "Node", Name: n.opts.NodeName},
			}, metav1.CreateOptions{})
		case proc == nil && (pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending):
			p, err := n.startLauncher(pod)
			if err != nil {
				err = fmt.Errorf("localnode: starting the launcher of pod %s/%s: %w", pod.Namespace, pod.Name, err)
				n.fail(err)
				log.Error(err, "pod failed")
				pod.Status.Phase = corev1.PodFailed
				pod.Status.Message = err.Error()
				_, _ = podsAPI.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				continue
			}
			log.V(1).Info("launcher started", "pod", klog.KObj(pod), "pid", p.Pid())
			n.mu.Lock()
			n.procs[pod.UID] = p
			n.mu.Unlock()
			pod.Status.Phase = corev1.PodRunning
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "compute", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
			_, _ = podsAPI.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		case pod.Status.Phase == corev1.PodRunning && exited:
			if err := n.containerGone(ctx, proc); err != nil {
				n.fail(err)
			}
			code := int32(proc.cmd.ProcessState.ExitCode())
			pod.Status.Phase = corev1.PodSucceeded
			if code != 0 {
				pod.Status.Phase = corev1.PodFailed
			}
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "compute",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
			_, _ = podsAPI.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		}
	}
}

// startLauncher runs the compute container's command line as a local process.
func (n *Node) startLauncher(pod *corev1.Pod) (*Launcher, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "compute" {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil || len(c.Command) == 0 {
		return nil, errors.New("no compute container with a command")
	}
	args := append(append([]string(nil), c.Command[1:]...), c.Args...)
	podDir := filepath.Join(n.opts.BaseDir, "pods", string(pod.UID)[:8])
	vmiUID := types.UID(pod.Labels[v1.CreatedByLabel])
	dirs := map[string]string{
		"--kubevirt-share-dir": n.share,
		"--ephemeral-disk-dir": filepath.Join(podDir, "eph"),
		"--container-disk-dir": filepath.Join(podDir, "cd"),
	}
	p := &Launcher{VMIUID: vmiUID, PodName: pod.Name, PodDir: podDir, LogPath: filepath.Join(podDir, "launcher.log"), done: make(chan struct{})}
	for i := 0; i+1 < len(args); i++ {
		if d, ok := dirs[args[i]]; ok {
			args[i+1] = d
		}
		switch args[i] {
		case "--namespace":
			p.ns = args[i+1]
		case "--name":
			p.name = args[i+1]
		}
	}
	args = append(args, "--private-dir", filepath.Join(podDir, "priv"), "--libvirt-uri", n.opts.LibvirtURI)
	if n.opts.ForceEmulation {
		args = append(args, "--force-emulation")
	}
	kb := filepath.Join(podDir, "cd", string(vmiUID), "kernel-boot")
	if err := os.MkdirAll(kb, 0o755); err != nil {
		return nil, err
	}
	for _, f := range n.guest {
		src, err := filepath.Abs(filepath.Join(n.opts.GuestDir, f))
		if err != nil {
			return nil, err
		}
		if err := os.Symlink(src, filepath.Join(kb, f)); err != nil {
			return nil, err
		}
	}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(n.opts.LauncherBinary, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// The launcher dies with the process that plays the kubelet.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p.Started = time.Now()
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// containerGone does what the container runtime does when the compute
// container ends: QEMU, a process of that container, ends with it. With a
// node's libvirt the domain would outlive the launcher, so remove it here.
func (n *Node) containerGone(ctx context.Context, p *Launcher) error {
	if n.opts.Domains == nil {
		return n.virshCleanup(ctx, p)
	}
	doms, err := n.opts.Domains.List(ctx, string(p.VMIUID))
	if err != nil {
		return fmt.Errorf("localnode: domains of VMI %s: %w", p.VMIUID, err)
	}
	for _, d := range doms {
		_ = n.opts.Domains.Destroy(ctx, d.Name)
		if err := n.opts.Domains.Undefine(ctx, d.Name); err != nil {
			return fmt.Errorf("localnode: removing domain %s of VMI %s: %w", d.Name, p.VMIUID, err)
		}
	}
	return nil
}

// virshCleanup removes the domain <namespace>_<name> (domainxml's naming) if
// its vmkit metadata names the launcher's VMI.
func (n *Node) virshCleanup(ctx context.Context, p *Launcher) error {
	if p.ns == "" || p.name == "" {
		return nil
	}
	dom := p.ns + "_" + p.name
	virsh := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "virsh", append([]string{"-c", n.opts.LibvirtURI}, args...)...).CombinedOutput()
	}
	xml, err := virsh("dumpxml", "--inactive", dom)
	if err != nil || !strings.Contains(string(xml), "<uid>"+string(p.VMIUID)+"</uid>") {
		return nil // no such domain, or another VMI's
	}
	_, _ = virsh("destroy", dom)
	if out, err := virsh("undefine", "--nvram", dom); err != nil {
		return fmt.Errorf("localnode: virsh undefine %s: %w: %s", dom, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
