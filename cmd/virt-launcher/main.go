// Command virt-launcher runs the domain of one VirtualMachineInstance: it is
// the compute container of the launcher pod (see podtemplate), wired to
// nodeagent/launcher and libvirt.
//
// With --libvirt-uri it uses that libvirt daemon (a node's qemu:///system,
// which is what the local arrangement and the tests use); without it, it
// starts its own virtlogd and libvirtd inside the pod, as KubeVirt's
// launcher does: as root, libvirt's system instance at qemu:///system; as
// any other user (the qemu user 107 of the default, non-root launcher
// pod), a session instance under the XDG directories, reached at
// qemu+unix:///session?socket=$XDG_RUNTIME_DIR/libvirt/libvirt-sock (see
// libvirtd.go).
//
// It exits after the domain ended (status 0), leaving the final state in
// <share-dir>/sockets/<uid>/final.json; SIGTERM stops the guest gracefully
// within --grace-period-seconds first.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/internal/supervisor"
	"github.com/vmkit/vmkit/nodeagent/hypervisor/libvirt"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/podtemplate"
)

// reapFlag runs virt-launcher as a reaper of the command that follows
// (supervisor.Reap): libvirtd leaves QEMU processes that nothing else in a
// launcher container would reap.
const reapFlag = "--reap"

// superviseFlag runs virt-launcher as the supervisor of the daemon that
// follows (libvirtd, virtlogd): supervisor.Run, which restarts the daemon
// when it exits without being told to and reaps what ends below it.
//
// libvirtd dying does not take the guest with it: QEMU is daemonized, so
// it is the supervisor's child, not libvirtd's, and keeps running; the
// restarted libvirtd re-attaches to it from its state files (the domain's
// <name>.xml and <name>.pid under libvirt's run directory), and the
// launcher's connection reconnects on its next call.
const superviseFlag = "--supervise"

func main() {
	sup := supervisor.Options{Log: log.New(os.Stderr, "virt-launcher: ", 0)}
	if len(os.Args) > 2 && os.Args[1] == reapFlag {
		os.Exit(supervisor.Reap(os.Args[2:], sup))
	}
	if len(os.Args) > 2 && os.Args[1] == superviseFlag {
		os.Exit(supervisor.Run(os.Args[2:], sup))
	}
	if len(os.Args) > 2 && os.Args[1] == probeFlag {
		os.Exit(probe(os.Args[2:], os.Stdout, os.Stderr))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "virt-launcher:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg         launcher.Config
		qemuTimeout time.Duration
		grace       int
		uri         string
		libvirtWait time.Duration
	)
	fs := flag.NewFlagSet("virt-launcher", flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", "", "name of the VirtualMachineInstance")
	fs.StringVar(&cfg.UID, "uid", "", "UID of the VirtualMachineInstance")
	fs.StringVar(&cfg.Namespace, "namespace", "", "namespace of the VirtualMachineInstance")
	fs.StringVar(&cfg.ShareDir, "kubevirt-share-dir", "/var/run/kubevirt", "directory shared with the node agent (command socket under sockets/<uid>/)")
	fs.StringVar(&cfg.EphemeralDiskDir, "ephemeral-disk-dir", domainxml.DefaultEphemeralDiskDir, "directory for overlays, empty disks and cloud-init ISOs")
	fs.StringVar(&cfg.ContainerDiskDir, "container-disk-dir", "/var/run/kubevirt/container-disks", "directory the container-disk sidecars serve images in")
	fs.StringVar(&cfg.PrivateDir, "private-dir", domainxml.DefaultPrivateDir, "directory for PVC mounts, secrets and the console and VNC sockets")
	fs.StringVar(&cfg.VMStateDir, "vm-state-dir", podtemplate.VMStateDir, "where the VMI's backend-storage claim (persistent TPM and EFI state) is mounted")
	fs.DurationVar(&qemuTimeout, "qemu-timeout", 240*time.Second, "exit when no domain was synced within this time")
	fs.IntVar(&grace, "grace-period-seconds", 30, "how long a graceful stop waits before destroying the guest")
	fs.BoolVar(&cfg.Emulation, "use-emulation", false, "allow running the guest under TCG when libvirt offers no KVM")
	fs.BoolVar(&cfg.ForceEmulation, "force-emulation", false, "run the guest under TCG even where libvirt offers KVM (a /dev/kvm that does not run guests)")
	fs.StringVar(&uri, "libvirt-uri", "", "libvirt daemon to use; empty starts virtlogd and libvirtd in this container")
	fs.DurationVar(&libvirtWait, "libvirt-wait", 60*time.Second, "how long to wait for libvirt to answer")
	fs.DurationVar(&cfg.HypervisorTimeout, "libvirt-unavailable-timeout", launcher.DefaultHypervisorTimeout, "how long libvirt may stay unavailable before the launcher kills the guest and fails (LibvirtUnavailable)")
	fs.IntVar(&cfg.LessPVCSpaceToleration, "less-pvc-space-toleration", launcher.DefaultLessPVCSpaceToleration, "percent by which an empty Filesystem claim's free space may fall short of the disk.img created in it (0: none)")
	fs.BoolVar(&cfg.ExpandDisks, "expand-disks", false, "grow the disks of claims whose capacity grew, at start and while the guest runs (KubeVirt's ExpandDisks feature gate)")
	fs.Int64Var(&cfg.MinimumPVCReserveBytes, "minimum-pvc-reserve-bytes", launcher.DefaultMinimumPVCReserveBytes, "bytes left free on an empty Filesystem claim when its disk.img is created (0: none)")
	// Accepted for compatibility with the pod podtemplate renders; unused.
	fs.Int("hook-sidecars", 0, "number of hook sidecars (unused)")
	fs.String("ovmf-path", "/usr/share/OVMF", "OVMF firmware directory (unused: domainxml's defaults)")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogFlags.Lookup("v").Value, "v", "log verbosity")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	// Zero on the command line means none; in launcher.Config, the default.
	if cfg.LessPVCSpaceToleration == 0 {
		cfg.LessPVCSpaceToleration = -1
	}
	if cfg.MinimumPVCReserveBytes == 0 {
		cfg.MinimumPVCReserveBytes = -1
	}
	cfg.SyncTimeout = qemuTimeout
	cfg.GracePeriod = time.Duration(grace) * time.Second

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if uri == "" {
		// libvirt in this container: the launcher knows where it keeps TPM
		// state (persistent TPMs link it to the backend storage).
		uri, cfg.SwtpmStorageDir = libvirt.DefaultURI, systemSwtpmStorageDir
		if os.Geteuid() != 0 {
			s, err := newSession(cfg.PrivateDir)
			if err != nil {
				return err
			}
			if err := s.configure(); err != nil {
				return err
			}
			uri, cfg.SwtpmStorageDir = s.uri(), s.swtpmStorageDir()
		}
		klog.InfoS("starting libvirt in the container", "uri", uri, "uid", os.Geteuid())
		daemons, err := startLibvirt(ctx)
		if err != nil {
			return err
		}
		defer daemons()
		// libvirt gone for good: stopping the daemons' supervisors kills
		// the QEMU left below them (supervisor.Run).
		cfg.KillDomain = func(context.Context) error { daemons(); return nil }
	}
	cfg.LibvirtSocket, cfg.LibvirtSession = libvirtEndpoint(uri) // for live migration (migration.go)
	connectCtx, cancel := context.WithTimeout(ctx, libvirtWait)
	h, err := connect(connectCtx, uri)
	cancel()
	if err != nil {
		return err
	}
	defer h.Close()
	cfg.Hypervisor = h

	l, err := launcher.New(cfg)
	if err != nil {
		return err
	}
	final, err := l.Run(ctx)
	klog.InfoS("domain ended", "state", final.State, "reason", final.Reason, "succeeded", final.Succeeded())
	return err
}

// connect retries every 50ms until libvirt answers or ctx ends (a
// libvirtd just started needs a moment to create its socket, and every
// VMI start waits on it).
func connect(ctx context.Context, uri string) (*libvirt.Hypervisor, error) {
	for {
		h, err := libvirt.New(ctx, libvirt.Options{URI: uri})
		if err == nil {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to libvirt at %s: %w", uri, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startLibvirt starts virtlogd and libvirtd as children of the launcher and
// returns a function that stops them (once; later calls do nothing).
func startLibvirt(ctx context.Context) (func(), error) {
	var procs []*exec.Cmd
	var once sync.Once
	stopAll := func() {
		once.Do(func() {
			for i := len(procs) - 1; i >= 0; i-- {
				_ = procs[i].Process.Signal(syscall.SIGTERM)
				_ = procs[i].Wait()
			}
		})
	}
	for _, name := range []string{"virtlogd", "libvirtd"} {
		path, err := exec.LookPath(name)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("starting %s (or pass --libvirt-uri): %w", name, err)
		}
		// Each daemon runs under this binary's supervisor, which restarts
		// it when it dies (see superviseFlag).
		self, err := os.Executable()
		if err != nil {
			stopAll()
			return nil, err
		}
		cmd := exec.Command(self, superviseFlag, path)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			stopAll()
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		procs = append(procs, cmd)
	}
	return stopAll, nil
}
