// Package launcher is the job of virt-launcher: it owns the domain of one
// VirtualMachineInstance. It prepares what the domain needs (copy-on-write
// overlays of container disks, empty disks, the cloud-init NoCloud ISO, the
// kernel-boot files), converts the VMI with domainxml, defines and starts
// the domain through a hypervisor.Hypervisor, keeps the guest's serial
// console attached (with a short history, so a late client still sees the
// boot), and serves a command socket at
// <ShareDir>/sockets/<VMI UID>/launcher.sock for the node agent: sync,
// shutdown, kill, pause, unpause, soft reboot, state, ping, console, VNC,
// file system freeze and thaw, the domain's statistics (for the node
// agent's metrics) and read-only QEMU guest agent queries.
//
// When the domain ends (the guest powered off, crashed, or was stopped on
// request) the launcher writes the final state next to the socket
// (final.json, see ReadFinal), removes the domain, its disks and the
// socket, and Run returns. Cancelling Run's context stops the guest
// gracefully (ACPI, then destroy after the grace period) the way SIGTERM
// does to KubeVirt's launcher.
//
// The package needs no cgo: the caller passes the hypervisor (cmd/virt-launcher
// passes libvirt's). Client talks to a launcher from the node agent.
//
// The ISO images of cloud-init (NoCloud, ConfigDrive) and config volumes
// are written by xorrisofs (Debian's xorriso package, in the launcher
// image), with Rock Ridge and Joliet names, as KubeVirt's launcher writes
// them. An ISO 9660 writer in Go did the same in 0.4 ms instead of about
// 100 ms (xorriso sleeps 0.1 s before it exits), but a VM starts in
// seconds, so no user notices the difference, while a hand-written file
// system format is code to keep correct. Of the Go libraries,
// github.com/kdomanski/iso9660 writes neither Rock Ridge nor Joliet names
// (cloud-init's "user-data" would read as "user_data") and
// github.com/diskfs/go-diskfs no Joliet names, which Windows guests read.
// See docs/performance.md.
package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Config configures a Launcher. Name, Namespace, UID, ShareDir and
// Hypervisor are required.
type Config struct {
	// Name, Namespace and UID identify the VMI this launcher runs.
	Name, Namespace, UID string
	// ShareDir holds the command socket under sockets/<UID>/
	// (--kubevirt-share-dir, /var/run/kubevirt in the pod).
	ShareDir string
	// EphemeralDiskDir holds overlays, empty disks and cloud-init ISOs
	// (--ephemeral-disk-dir); domainxml.DefaultEphemeralDiskDir when empty.
	EphemeralDiskDir string
	// ContainerDiskDir is where the container-disk sidecars serve the
	// images (--container-disk-dir): volume n of spec.volumes at
	// <dir>/<UID>/disk_<n> (or <dir>/disk_<n>), a file or a directory
	// holding one image; the kernel-boot image's files under
	// <dir>/<UID>/kernel-boot/.
	ContainerDiskDir string
	// PrivateDir holds PVC mounts, secrets and the console and VNC sockets
	// under <UID>/; domainxml.DefaultPrivateDir when empty.
	PrivateDir string
	// VMStateDir is where the VMI's backend-storage claim is mounted
	// (--vm-state-dir, podtemplate.VMStateDir): a VMI with persistent
	// state keeps its TPM state in swtpm/ and its EFI variable store in
	// nvram/ there. Empty, or not a directory: such a VMI fails with an
	// error naming the field.
	VMStateDir string
	// SwtpmStorageDir is where the hypervisor keeps the state of emulated
	// TPMs (libvirt's /var/lib/libvirt/swtpm, $XDG_CONFIG_HOME/libvirt/
	// qemu/swtpm for a session instance). For a persistent TPM the launcher
	// makes it a link to VMStateDir/swtpm, so the TPM keeps its state across
	// VMIs of a VM (libvirt names the state by the domain's UUID, the VM's
	// firmware UUID). Empty: a persistent TPM fails.
	SwtpmStorageDir string
	// HotplugDiskDir is where the node agent mounts hotplugged claims into
	// the pod, <HotplugDiskDir>/<volume>: a Filesystem claim's directory
	// (holding disk.img) or a Block claim's device; DefaultHotplugDiskDir
	// (podtemplate.Config.HotplugDiskDir's default) when empty.
	HotplugDiskDir string
	// DeviceDir holds the block devices of Block claims, /dev/<volume> as
	// the launcher pod's volumeDevices attach them; "/dev" when empty.
	DeviceDir string
	// GracePeriod is how long a graceful stop waits for the guest before
	// destroying it (--grace-period-seconds); 30s when zero.
	GracePeriod time.Duration
	// SyncTimeout ends the launcher with an error when no VMI was synced in
	// this time (--qemu-timeout); no limit when zero.
	SyncTimeout time.Duration
	// HypervisorTimeout is how long the hypervisor may stay unavailable
	// (calls failing with hypervisor.ErrUnavailable: libvirtd died and
	// is not back) before the launcher gives the domain up: it kills the
	// guest with KillDomain and ends with reason
	// hypervisor.ReasonLibvirtUnavailable. 60s when zero (see
	// unavailable.go).
	HypervisorTimeout time.Duration
	// KillDomain ends the guest's processes without the hypervisor, when
	// it stayed unavailable past HypervisorTimeout. cmd/virt-launcher
	// stops the libvirt it started, whose supervisor kills the QEMU left
	// below it. Nil: a guest of a daemon the launcher does not own is left
	// as it is (the final status says so).
	KillDomain func(context.Context) error
	// Emulation allows running the guest under QEMU's TCG emulator when the
	// hypervisor reports no usable KVM for the guest's architecture
	// (--use-emulation, the KubeVirt CR's useEmulation). Where KVM works the
	// guest uses it either way; without KVM and without Emulation the VMI
	// fails with an error that names both.
	Emulation bool
	// ForceEmulation runs the guest under TCG without asking the
	// hypervisor (--force-emulation): for nodes whose /dev/kvm is advertised
	// but does not run guests.
	ForceEmulation bool
	// Hypervisor runs the domain.
	Hypervisor hypervisor.Hypervisor
	// QEMUImg is the qemu-img binary; looked up in PATH when empty; "none"
	// does without. Without it container disks are copied and empty disks
	// are sparse raw files.
	QEMUImg string
	// LessPVCSpaceToleration is the percentage by which the free space of
	// an empty Filesystem claim may fall short of the disk.img created in
	// it (the image then takes the free space; see claimimage.go)
	// (--less-pvc-space-toleration, the KubeVirt CR's
	// pvcTolerateLessSpaceUpToPercent); DefaultLessPVCSpaceToleration when
	// zero, none when negative.
	LessPVCSpaceToleration int
	// MinimumPVCReserveBytes is left free on an empty Filesystem claim when
	// its disk.img is created (--minimum-pvc-reserve-bytes, the KubeVirt
	// CR's minimumReservePVCBytes); DefaultMinimumPVCReserveBytes when
	// zero, none when negative.
	MinimumPVCReserveBytes int64
	// ExpandDisks grows the disks of claims whose capacity grew, at start
	// and while the guest runs (--expand-disks, KubeVirt's ExpandDisks
	// feature gate; expanddisks.go).
	ExpandDisks bool
	// PollInterval is how often the domain's state is checked; 250ms when zero.
	PollInterval time.Duration
	// ConsoleHistory is how many bytes of console output are kept for
	// clients that ask for history; 64 KiB when zero.
	ConsoleHistory int
	// GuestAgentTimeout bounds one guest agent command;
	// DefaultGuestAgentTimeout when zero.
	GuestAgentTimeout time.Duration
	// ResolvConf is the resolver configuration whose name servers and
	// search domains the guest gets by DHCP; DefaultResolvConf when empty.
	ResolvConf string
	// LibvirtSocket is the UNIX socket of the libvirt daemon the
	// hypervisor talks to, as this launcher sees it: a migration's source
	// libvirt reaches it through the node agents' proxy. Without it the
	// launcher cannot be a migration target (see migrate.go).
	LibvirtSocket string
	// LibvirtSession: that daemon runs in session mode (a non-root
	// launcher's qemu:///session), so a migration's destination URI is
	// qemu+unix:///session instead of qemu+unix:///system.
	LibvirtSession bool
	// AccessCredentialInterval is how often the Secrets of the VMI's
	// guest-agent access credentials are read, and written into the guest
	// when they changed (see accesscred.go);
	// DefaultAccessCredentialInterval when zero.
	AccessCredentialInterval time.Duration
	// CPUSet returns the host CPUs this launcher may run on: a guest with
	// spec.domain.cpu.dedicatedCpuPlacement has its vCPUs pinned to them
	// (and its emulator thread to the next one with isolateEmulatorThread).
	// The kubelet's static CPU manager gives a Guaranteed pod's container
	// CPUs of its own through the container's cpuset, which bounds the
	// affinity of every process in it. Nil reads this process's CPU
	// affinity (AffinityCPUs).
	CPUSet func() ([]uint, error)
}

// Launcher runs the domain of one VMI. Create it with New, then call Run.
type Launcher struct {
	cfg Config
	h   hypervisor.Hypervisor

	mu      sync.Mutex
	synced  chan struct{} // closed by the first successful sync
	vmi     *v1.VirtualMachineInstance
	domain  string
	opts    domainxml.Options
	started bool
	// startedPaused: the domain was started paused as the VMI asked
	// (spec.startStrategy: Paused).
	startedPaused bool
	stopping      bool // a shutdown or kill was requested
	last          hypervisor.DomainState
	final         *Status
	done          chan struct{} // closed when the domain ended
	console       *consoleHub
	createdAt     []string          // directories this launcher created, removed at the end
	macs          map[string]string // interface name → MAC the node agent chose
	dhcp          map[string]bool   // devices a DHCP server answers on
	passtIface    string            // the interface with the passtBinding, from the node agent
	passtArgs     []string          // passt's port arguments for it (network.PasstArgs)
	passt         *passtProcess     // the running passt (passt.go)
	steps         StartSteps        // when the start's steps ended
	runCtx        context.Context   // ends when Run returns; DHCP servers live as long
	stopRun       context.CancelFunc
	thawTimer     *time.Timer // thaws the guest's file systems when a Freeze's unfreeze timeout passes
	thawGen       uint64      // moves on with every Freeze and Unfreeze; a timer of an older one does nothing

	accessCreds *AccessCredentialsStatus // the last sync of the guest-agent access credentials (accesscred.go)

	cpuTopology *v1.CPUTopology      // the guest's CPU topology, hot-plugged sockets included (hotplug.go)
	memory      *v1.MemoryStatus     // the guest's memory when it can grow (virtio-mem; hotplug.go)
	volumes     []HotplugVolume      // the hotplugged volumes, as the last sync left them (volumehotplug.go)
	detachAsked map[string]time.Time // hot-plugged volumes the guest was asked to release, and when
	dumps       []MemoryDump         // memory dumps onto memoryDump volumes (volumehotplug.go)
	claimSizes  map[string]int64     // with ExpandDisks: the claim capacities the last expansion saw (expanddisks.go)

	terminated bool // Run's context ended before a stop was requested (Status.Terminated)

	// Live migration (migrate.go).
	incoming        string           // a migration target: the domain it waits for
	migration       *MigrationStatus // the last migration, as source or target
	migrating       bool             // a migration from here is under way
	cancelMigration context.CancelFunc

	// The hypervisor's availability (unavailable.go).
	unavailableSince time.Time // first of the calls failing with ErrUnavailable since the last answer
	abandoned        bool      // given up: end makes no more hypervisor calls
}

// Status is what the launcher reports about its domain.
type Status struct {
	// UID of the VMI.
	UID string `json:"uid"`
	// Domain is the libvirt domain name once defined.
	Domain string `json:"domain,omitempty"`
	// Defined and Started say how far the domain got.
	Defined bool `json:"defined"`
	Started bool `json:"started"`
	// State and Reason are the domain's, as the hypervisor reports them.
	State  hypervisor.State  `json:"state,omitempty"`
	Reason hypervisor.Reason `json:"reason,omitempty"`
	// StopRequested: a shutdown or kill was asked for (or the launcher was
	// told to stop), so the domain's end was wanted.
	StopRequested bool `json:"stopRequested,omitempty"`
	// Final: the domain ended and the launcher is exiting or gone.
	Final bool `json:"final,omitempty"`
	// Terminated: the launcher itself was told to stop (SIGTERM, Run's
	// context ended) before a stop was asked for through its socket: the
	// kubelet killed the compute container because the pod was deleted or
	// evicted, or because the VMI's liveness probe failed.
	Terminated bool `json:"terminated,omitempty"`
	// Message explains a failure, when there was one.
	Message string `json:"message,omitempty"`
	// Migration is the last migration of the domain, from or to this
	// launcher. A final status with reason Migrated is the end of a source
	// launcher whose guest now runs on the target.
	Migration *MigrationStatus `json:"migration,omitempty"`
	// AccessCredentials is how the last sync of the VMI's guest-agent
	// access credentials went; nil while none ended (or the VMI has none).
	AccessCredentials *AccessCredentialsStatus `json:"accessCredentials,omitempty"`
	// CPUTopology is the CPU topology the guest has now, CPU hotplug
	// included (the VMI's status.currentCPUTopology); nil before the
	// domain is defined or when the VMI names no topology.
	CPUTopology *v1.CPUTopology `json:"cpuTopology,omitempty"`
	// Memory is the guest's memory (the VMI's status.memory: at boot,
	// requested, plugged) when it can grow (maxGuest); nil otherwise.
	Memory *v1.MemoryStatus `json:"memory,omitempty"`
	// Timeline is when the launcher's steps of the start ended; nil
	// before the disks are prepared.
	Timeline *StartSteps `json:"timeline,omitempty"`
	// HotplugVolumes are the VMI's hotpluggable volumes as the last sync
	// left them: attached to the guest, waiting for their mount, or failed.
	HotplugVolumes []HotplugVolume `json:"hotplugVolumes,omitempty"`
	// MemoryDumps are the memory dumps onto the VMI's memoryDump volumes.
	MemoryDumps []MemoryDump `json:"memoryDumps,omitempty"`
	// HotplugDiskDir is the launcher's Config.HotplugDiskDir, its symbolic
	// links resolved (/var/run is /run in most images): where the node
	// agent mounts hotplugged claims in the launcher's mount namespace, as
	// its mount table names them.
	HotplugDiskDir string `json:"hotplugDiskDir,omitempty"`
	// ClaimCapacities are, with Config.ExpandDisks, the capacities (bytes)
	// of the VMI's claims the last sync grew the disks to fit, by volume;
	// nil without ExpandDisks. ExpandPending compares them with the VMI's.
	ClaimCapacities map[string]int64 `json:"claimCapacities,omitempty"`
	// Time is when the status was taken.
	Time time.Time `json:"time"`
}

// StartSteps are when the launcher's steps of a start ended, for the VMI's
// start timeline (v1.StartTimelineAnnotation); zero until then.
type StartSteps struct {
	DisksPrepared time.Time `json:"disksPrepared,omitzero"`
	DomainDefined time.Time `json:"domainDefined,omitzero"`
	DomainStarted time.Time `json:"domainStarted,omitzero"`
}

// Succeeded reports whether a final status is a clean end: the guest shut
// itself down, or it was stopped on request.
func (s Status) Succeeded() bool {
	if s.State != hypervisor.StateShutoff {
		return false
	}
	switch s.Reason {
	case hypervisor.ReasonShutdown:
		return true
	case hypervisor.ReasonDestroyed:
		return s.StopRequested
	}
	return false
}

// Names of the files in a launcher's socket directory.
const (
	// SocketFile is the command socket.
	SocketFile = "launcher.sock"
	// FinalFile holds the final status (see ReadFinalDir).
	FinalFile = "final.json"
)

// SocketDir is the directory of the command socket of the VMI with the
// given UID: <shareDir>/sockets/<uid>.
func SocketDir(shareDir, uid string) string {
	return filepath.Join(shareDir, "sockets", uid)
}

// SocketPath is the command socket of the VMI with the given UID.
func SocketPath(shareDir, uid string) string {
	return filepath.Join(SocketDir(shareDir, uid), SocketFile)
}

// FinalPath is where a launcher leaves the final status of its domain.
func FinalPath(shareDir, uid string) string {
	return filepath.Join(SocketDir(shareDir, uid), FinalFile)
}

// ReadFinal reads the final status a launcher left; an error wrapping
// os.ErrNotExist when it left none.
func ReadFinal(shareDir, uid string) (Status, error) {
	return ReadFinalDir(SocketDir(shareDir, uid))
}

// ReadFinalDir reads the final status a launcher left in its socket
// directory dir, wherever that directory is seen (a kubelet pod's volume,
// for instance); an error wrapping os.ErrNotExist when it left none.
func ReadFinalDir(dir string) (Status, error) {
	var s Status
	path := filepath.Join(dir, FinalFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("final status %s: %w", path, err)
	}
	return s, nil
}

// New checks cfg and returns a Launcher.
func New(cfg Config) (*Launcher, error) {
	var missing []error
	for _, f := range []struct{ name, v string }{{"Name", cfg.Name}, {"Namespace", cfg.Namespace}, {"UID", cfg.UID}, {"ShareDir", cfg.ShareDir}} {
		if f.v == "" {
			missing = append(missing, fmt.Errorf("launcher config: %s is required", f.name))
		}
	}
	if cfg.Hypervisor == nil {
		missing = append(missing, errors.New("launcher config: Hypervisor is required"))
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	if cfg.EphemeralDiskDir == "" {
		cfg.EphemeralDiskDir = domainxml.DefaultEphemeralDiskDir
	}
	if cfg.PrivateDir == "" {
		cfg.PrivateDir = domainxml.DefaultPrivateDir
	}
	if cfg.DeviceDir == "" {
		cfg.DeviceDir = "/dev"
	}
	if cfg.HotplugDiskDir == "" {
		cfg.HotplugDiskDir = DefaultHotplugDiskDir
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = 30 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.HypervisorTimeout <= 0 {
		cfg.HypervisorTimeout = DefaultHypervisorTimeout
	}
	if cfg.ConsoleHistory <= 0 {
		cfg.ConsoleHistory = 64 << 10
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = DefaultResolvConf
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	if dir, err := filepath.EvalSymlinks(cfg.HotplugDiskDir); err == nil {
		// As the launcher's mount table names it (/var/run is /run in
		// most images): the node agent finds its mounts there.
		cfg.HotplugDiskDir = dir
	}
	return &Launcher{
		cfg:     cfg,
		h:       cfg.Hypervisor,
		synced:  make(chan struct{}),
		done:    make(chan struct{}),
		console: newConsoleHub(cfg.ConsoleHistory),
		macs:    map[string]string{},
		dhcp:    map[string]bool{},
		runCtx:  runCtx,
		stopRun: stopRun,
	}, nil
}

func (l *Launcher) key() string { return l.cfg.Namespace + "/" + l.cfg.Name }

// Run serves the command socket until the domain ends, then cleans up and
// returns the final status. Cancelling ctx stops the guest gracefully
// first. It returns an error when the socket cannot be served or no VMI
// was synced within Config.SyncTimeout.
func (l *Launcher) Run(ctx context.Context) (Status, error) {
	defer l.stopRun()
	log := klog.FromContext(ctx).WithValues("vmi", l.key(), "uid", l.cfg.UID)
	dir := SocketDir(l.cfg.ShareDir, l.cfg.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Status{}, fmt.Errorf("launcher of VMI %s: %w", l.key(), err)
	}
	_ = os.Remove(FinalPath(l.cfg.ShareDir, l.cfg.UID))
	sock := SocketPath(l.cfg.ShareDir, l.cfg.UID)
	_ = os.Remove(sock) // a stale socket of an earlier launcher
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return Status{}, fmt.Errorf("launcher of VMI %s: %w", l.key(), err)
	}
	srv := &http.Server{Handler: l.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("launcher serving", "socket", sock)

	var timeout <-chan time.Time
	if l.cfg.SyncTimeout > 0 {
		t := time.NewTimer(l.cfg.SyncTimeout)
		defer t.Stop()
		timeout = t.C
	}
	tick := time.NewTicker(l.cfg.PollInterval)
	defer tick.Stop()
	var runErr error
loop:
	for {
		select {
		case <-l.done:
			break loop
		case err := <-serveErr:
			runErr = fmt.Errorf("launcher of VMI %s: serving %s: %w", l.key(), sock, err)
			l.stop(context.WithoutCancel(ctx), true)
			break loop
		case <-timeout:
			select {
			case <-l.synced:
			default:
				runErr = fmt.Errorf("launcher of VMI %s: no domain was synced within %v", l.key(), l.cfg.SyncTimeout)
				l.end(context.WithoutCancel(ctx), hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonFailed}, runErr.Error())
				break loop
			}
		case <-ctx.Done():
			l.mu.Lock()
			l.terminated = !l.stopping
			l.mu.Unlock()
			log.Info("stopping the guest", "grace", l.cfg.GracePeriod)
			l.stop(context.WithoutCancel(ctx), true)
			break loop
		case <-tick.C:
			l.poll(ctx)
		}
	}
	// Another caller's end (a Kill while Run's own stop ran) may still be
	// destroying the domain and removing the directories: the launcher
	// exits only once that is done and the final status is written.
	<-l.done
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	_ = os.Remove(sock)
	l.mu.Lock()
	final := *l.final
	l.mu.Unlock()
	log.Info("launcher done", "state", final.State, "reason", final.Reason)
	return final, runErr
}

// poll checks the domain's state and ends the launcher when it ended.
func (l *Launcher) poll(ctx context.Context) {
	l.mu.Lock()
	started, name, final, incoming, migrating := l.started, l.domain, l.final, l.incoming, l.migrating
	l.mu.Unlock()
	if incoming != "" && final == nil {
		l.pollIncoming(ctx, incoming)
		return
	}
	if !started || final != nil || migrating {
		return // a migration's end is runMigration's to record
	}
	st, err := l.h.State(ctx, name)
	if l.hypervisorLost(err) {
		l.abandon(ctx, err)
		return
	}
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		l.end(ctx, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonUnknown}, "the domain disappeared")
	case err != nil:
		klog.FromContext(ctx).Error(err, "domain state", "vmi", l.key())
	case st.State == hypervisor.StateShutoff || st.State == hypervisor.StateCrashed:
		l.end(ctx, st, "")
	default:
		l.mu.Lock()
		l.last = st
		if l.pluggingLocked() {
			if err := l.refreshMemoryLocked(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "plugged memory", "vmi", l.key())
			}
		}
		l.mu.Unlock()
	}
}

// stop stops the guest: gracefully (ACPI, destroy after the grace period)
// or at once, and ends the launcher. Without a running domain it only ends.
func (l *Launcher) stop(ctx context.Context, graceful bool) {
	l.mu.Lock()
	started, name, final, incoming, cancelMigration := l.started, l.domain, l.final, l.incoming, l.cancelMigration
	l.stopping = true
	l.mu.Unlock()
	if final != nil {
		return
	}
	if cancelMigration != nil {
		cancelMigration() // the guest stays here: abort, then stop it
	}
	if incoming != "" {
		// A migration target told to stop: a half-arrived domain goes too.
		if err := l.h.Destroy(ctx, incoming); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			klog.FromContext(ctx).Error(err, "destroying the incoming domain", "vmi", l.key())
		}
	}
	if !started {
		l.end(ctx, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}, "stopped before the domain started")
		return
	}
	// While libvirt is unavailable the stop is retried until it answers
	// again or the launcher gives the domain up: a stop is never recorded
	// as done while the guest may still run.
	for {
		err := l.halt(ctx, name, graceful)
		if !errors.Is(err, hypervisor.ErrUnavailable) {
			break
		}
		if l.hypervisorLost(err) {
			l.abandon(ctx, err)
			return
		}
		klog.FromContext(ctx).Info("libvirt unavailable, the stop waits for it", "vmi", l.key(), "err", err.Error())
		select {
		case <-l.done: // given up by poll meanwhile
			return
		case <-time.After(time.Second):
		}
	}
	st, err := l.h.State(ctx, name)
	if err != nil {
		st = hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}
	}
	l.end(ctx, st, "")
}

// halt stops the guest, gracefully or at once; an error matching
// hypervisor.ErrUnavailable when libvirt did not answer.
func (l *Launcher) halt(ctx context.Context, name string, graceful bool) error {
	var err error
	if graceful {
		_, err = hypervisor.StopGracefully(ctx, l.h, name, l.cfg.GracePeriod, l.cfg.PollInterval)
	} else {
		err = l.h.Destroy(ctx, name)
	}
	l.hypervisorLost(err)
	if err == nil || errors.Is(err, hypervisor.ErrNotFound) || errors.Is(err, hypervisor.ErrUnavailable) {
		return err
	}
	klog.FromContext(ctx).Error(err, "stopping the domain", "vmi", l.key())
	derr := l.h.Destroy(ctx, name)
	l.hypervisorLost(derr)
	if derr != nil && !errors.Is(derr, hypervisor.ErrNotFound) {
		klog.FromContext(ctx).Error(derr, "destroying the domain", "vmi", l.key())
	}
	if errors.Is(derr, hypervisor.ErrUnavailable) {
		return derr
	}
	return nil
}

// end records the final status, removes the domain and what the launcher
// created, and lets Run return. Only the first call does anything.
func (l *Launcher) end(ctx context.Context, st hypervisor.DomainState, msg string) {
	l.mu.Lock()
	if l.final != nil {
		l.mu.Unlock()
		return
	}
	final := l.statusLocked()
	final.State, final.Reason, final.Final, final.Message = st.State, st.Reason, true, msg
	l.final = &final
	name, defined := l.domain, l.domain != "" && !l.abandoned
	dirs := l.createdAt
	l.mu.Unlock()

	log := klog.FromContext(ctx).WithValues("vmi", l.key())
	l.cancelThaw()
	l.console.close()
	if defined {
		if err := l.h.Destroy(ctx, name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			log.Error(err, "destroying the domain")
		}
		if err := l.h.Undefine(ctx, name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			log.Error(err, "undefining the domain")
		}
	}
	// The container disks' copies, in the pod's own directory for them
	// (seen at <dir>/<uid>/<name> or, where the sidecar's mount is the
	// per-VMI subdirectory, at <dir>/<name>): their sidecars exit once
	// these are gone, so the pod completes (a migration's source pod too).
	if l.cfg.ContainerDiskDir != "" {
		entries, _ := os.ReadDir(l.cfg.ContainerDiskDir)
		for _, e := range entries {
			dirs = append(dirs, filepath.Join(l.cfg.ContainerDiskDir, e.Name()))
		}
	}
	removeDirs(log, dirs)
	if err := writeFileAtomic(FinalPath(l.cfg.ShareDir, l.cfg.UID), final); err != nil {
		log.Error(err, "writing the final status")
	}
	close(l.done)
}

func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Status returns the launcher's view of its domain.
func (l *Launcher) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final
	}
	return l.statusLocked()
}

func (l *Launcher) statusLocked() Status {
	var mig *MigrationStatus
	if l.migration != nil {
		m := *l.migration
		mig = &m
	}
	var creds *AccessCredentialsStatus
	if l.accessCreds != nil {
		c := *l.accessCreds
		creds = &c
	}
	reason := l.last.Reason
	if l.startedPaused && l.last.State == hypervisor.StatePaused && reason == hypervisor.ReasonStartingUp {
		// Started paused as the VMI asked: the user's pause, as KubeVirt
		// reports it (libvirt says "starting up" until a resume).
		reason = hypervisor.ReasonUser
	}
	return Status{
		UID: l.cfg.UID, Domain: l.domain, Defined: l.domain != "", Started: l.started,
		State: l.last.State, Reason: reason, StopRequested: l.stopping, Terminated: l.terminated, Time: time.Now().UTC(),
		Migration: mig, Message: l.unavailableMessageLocked(), AccessCredentials: creds,
		CPUTopology: l.cpuTopology, Memory: l.memory.DeepCopy(),
		Timeline: l.timelineLocked(), HotplugVolumes: slices.Clone(l.volumes), MemoryDumps: slices.Clone(l.dumps), HotplugDiskDir: l.cfg.HotplugDiskDir,
		ClaimCapacities: maps.Clone(l.claimSizes),
	}
}

// timelineLocked is a copy of the start's steps, nil before the first.
func (l *Launcher) timelineLocked() *StartSteps {
	if l.steps.DisksPrepared.IsZero() {
		return nil
	}
	s := l.steps
	return &s
}

// errFinal: the domain ended; the launcher takes no more commands.
var errFinal = errors.New("the domain ended; the launcher is exiting")

// Sync defines and starts the domain of vmi when it is not running yet and
// returns the domain's status. The first sync prepares the disks; later
// syncs of a running domain hot-plug the CPU sockets its spec gained
// (hotplug.go) and change nothing else (a new definition would only apply
// after a restart).
func (l *Launcher) Sync(ctx context.Context, vmi *v1.VirtualMachineInstance) (Status, error) {
	if string(vmi.UID) != l.cfg.UID {
		return Status{}, fmt.Errorf("sync of VMI %s/%s: UID %s is not this launcher's VMI %s", vmi.Namespace, vmi.Name, vmi.UID, l.cfg.UID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final, errFinal
	}
	if l.stopping {
		return l.statusLocked(), nil
	}
	if l.incoming != "" {
		// A migration target: the guest arrives from the source; starting
		// it here too would run it twice.
		return l.statusLocked(), fmt.Errorf("sync of VMI %s: the launcher is a migration target waiting for the incoming domain: %w", l.key(), hypervisor.ErrInvalidState)
	}
	if l.domain == "" {
		vmi := l.withNetworkMACs(vmi)
		opts, created, err := l.prepare(ctx, vmi)
		l.createdAt = append(l.createdAt, created...)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("preparing VMI %s: %w", l.key(), err)
		}
		l.steps.DisksPrepared = time.Now().UTC()
		if err := l.chooseAcceleration(ctx, vmi, &opts); err != nil {
			return l.statusLocked(), fmt.Errorf("VMI %s: %w", l.key(), err)
		}
		if hasPasstBinding(vmi) {
			if l.passtArgs == nil {
				return l.statusLocked(), fmt.Errorf("VMI %s: the node agent has not configured the passtBinding interface yet", l.key())
			}
			if err := l.startPasstLocked(ctx, opts.PasstSocket); err != nil {
				return l.statusLocked(), fmt.Errorf("VMI %s: %w", l.key(), err)
			}
		}
		dom, err := domainxml.Convert(vmi, opts)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("converting VMI %s: %w", l.key(), err)
		}
		xml, err := domainxml.Marshal(dom)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("converting VMI %s: %w", l.key(), err)
		}
		defined, err := l.h.Define(ctx, xml)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("defining the domain of VMI %s: %w", l.key(), err)
		}
		l.steps.DomainDefined = time.Now().UTC()
		l.domain, l.opts, l.vmi = defined.Name, opts, vmi.DeepCopy()
		l.last = defined.State
		l.cpuTopology = definedTopology(vmi, dom)
		l.memory = bootMemory(dom)
		select {
		case <-l.synced:
		default:
			close(l.synced)
		}
	}
	if !l.started {
		if err := l.startLocked(ctx); err != nil {
			return l.statusLocked(), err
		}
		if l.steps.DomainStarted.IsZero() {
			l.steps.DomainStarted = time.Now().UTC()
		}
	} else if err := l.hotplugCPUsLocked(ctx, vmi); err != nil {
		return l.statusLocked(), err
	} else if err := l.hotplugMemoryLocked(ctx, vmi); err != nil {
		return l.statusLocked(), err
	}
	if l.started {
		if err := l.syncVolumesLocked(ctx, vmi); err != nil {
			return l.statusLocked(), err
		}
		if err := l.expandDisksLocked(ctx, vmi); err != nil {
			return l.statusLocked(), err
		}
	}
	if st, err := l.h.State(ctx, l.domain); err == nil {
		l.last = st
	}
	return l.statusLocked(), nil
}

// startLocked starts the domain paused, attaches the console so no output
// is lost, and resumes it, unless the VMI asks to start paused
// (spec.startStrategy: Paused, what `virtctl start --paused` writes): then
// the guest stays paused until unpaused, reported as paused by the user.
func (l *Launcher) startLocked(ctx context.Context) error {
	st, err := l.h.State(ctx, l.domain)
	if err != nil {
		return fmt.Errorf("starting the domain of VMI %s: %w", l.key(), err)
	}
	if st.State == hypervisor.StateShutoff {
		if err := l.h.Start(ctx, l.domain, hypervisor.StartOptions{Paused: true}); err != nil {
			return fmt.Errorf("starting the domain of VMI %s: %w", l.key(), err)
		}
	}
	l.attachSerial(ctx, l.domain)
	if startsPaused(l.vmi) {
		l.started, l.startedPaused = true, true
		if hasGuestAgentCredentials(l.vmi) {
			go l.syncAccessCredentials(klog.NewContext(l.runCtx, klog.FromContext(ctx)), l.vmi)
		}
		return nil
	}
	if st, err := l.h.State(ctx, l.domain); err == nil && st.State == hypervisor.StatePaused {
		if err := l.h.Resume(ctx, l.domain); err != nil {
			return fmt.Errorf("resuming the domain of VMI %s: %w", l.key(), err)
		}
	}
	l.started = true
	if hasGuestAgentCredentials(l.vmi) {
		go l.syncAccessCredentials(klog.NewContext(l.runCtx, klog.FromContext(ctx)), l.vmi)
	}
	return nil
}

// startsPaused reports whether vmi asks its guest to start paused.
func startsPaused(vmi *v1.VirtualMachineInstance) bool {
	return vmi != nil && vmi.Spec.StartStrategy != nil && *vmi.Spec.StartStrategy == v1.StartStrategyPaused
}

// attachSerial connects the console hub to domain name's serial console,
// unless the VMI has none (autoattachSerialConsole: false); a failure is
// logged.
func (l *Launcher) attachSerial(ctx context.Context, name string) {
	if a := l.vmi.Spec.Domain.Devices.AutoattachSerialConsole; a != nil && !*a {
		return
	}
	c, err := l.h.Console(ctx, name)
	if err != nil {
		klog.FromContext(ctx).Error(err, "attaching the serial console", "vmi", l.key(), "domain", name)
		return
	}
	l.console.attach(c)
}

// Shutdown asks the guest to power off and destroys it after the grace
// period; it returns at once.
func (l *Launcher) Shutdown(ctx context.Context) Status {
	l.mu.Lock()
	already := l.stopping
	l.stopping = true
	l.mu.Unlock()
	if !already {
		go l.stop(context.WithoutCancel(ctx), true)
	}
	return l.Status()
}

// Kill destroys the domain at once.
func (l *Launcher) Kill(ctx context.Context) Status {
	// The stop outlives a caller that gives up waiting (libvirt may be
	// unavailable for a while): ending it half-way would record a stop
	// that did not happen.
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.stop(context.WithoutCancel(ctx), false)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return l.Status()
}

// SoftReboot asks the guest to restart, through the QEMU guest agent or by
// an ACPI power button press (see hypervisor.RebootMethod), and returns
// without waiting for it. ACPI is refused (hypervisor.ErrInvalidState) when
// the VMI disables it (spec.domain.features.acpi.enabled=false), and so is
// a domain that is not running (paused, not started); through an agent that
// does not answer within Config.GuestAgentTimeout it fails with
// hypervisor.ErrAgentUnavailable.
func (l *Launcher) SoftReboot(ctx context.Context, method hypervisor.RebootMethod) (Status, error) {
	l.mu.Lock()
	acpi := l.vmi == nil || acpiEnabled(l.vmi)
	l.mu.Unlock()
	domain, err := l.startedDomain("soft reboot")
	if err != nil {
		return l.Status(), err
	}
	switch method {
	case hypervisor.RebootGuestAgent:
	case hypervisor.RebootACPI:
		if !acpi {
			return l.Status(), fmt.Errorf("soft reboot of VMI %s: ACPI is disabled (spec.domain.features.acpi.enabled): %w", l.key(), hypervisor.ErrInvalidState)
		}
	default:
		return l.Status(), fmt.Errorf("soft reboot of VMI %s: %w %q", l.key(), errUnknownRebootMethod, method)
	}
	// Not under l.mu: the guest agent may take its time.
	timeout := l.agentTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := l.h.Reboot(ctx, domain, method); err != nil {
		if method == hypervisor.RebootGuestAgent {
			err = agentTimedOut(err, timeout)
		}
		return l.Status(), fmt.Errorf("soft reboot of VMI %s: %w", l.key(), err)
	}
	return l.Status(), nil
}

// errUnknownRebootMethod: a reboot method that is not a hypervisor.RebootMethod.
var errUnknownRebootMethod = errors.New("unknown reboot method")

// acpiEnabled reports whether the VMI's guest has ACPI: unless
// spec.domain.features.acpi.enabled is false.
func acpiEnabled(vmi *v1.VirtualMachineInstance) bool {
	f := vmi.Spec.Domain.Features
	return f == nil || f.ACPI.Enabled == nil || *f.ACPI.Enabled
}

// Pause stops the guest's vCPUs.
func (l *Launcher) Pause(ctx context.Context) (Status, error) {
	return l.lifecycle(ctx, "pause", l.h.Pause)
}

// Unpause resumes the guest's vCPUs.
func (l *Launcher) Unpause(ctx context.Context) (Status, error) {
	return l.lifecycle(ctx, "unpause", l.h.Resume)
}

// Reset resets the guest at once, as KubeVirt's reset does
// (hypervisor.Hypervisor.Reset): it boots again in the same QEMU process,
// without asking it. A paused guest is reset and stays paused; a domain not
// started yet, or ended, is a 409.
func (l *Launcher) Reset(ctx context.Context) (Status, error) {
	return l.lifecycle(ctx, "reset", l.h.Reset)
}

func (l *Launcher) lifecycle(ctx context.Context, op string, fn func(context.Context, string) error) (Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final, errFinal
	}
	if !l.started {
		return l.statusLocked(), fmt.Errorf("%s VMI %s: %w", op, l.key(), hypervisor.ErrInvalidState)
	}
	if err := fn(ctx, l.domain); err != nil {
		return l.statusLocked(), fmt.Errorf("%s VMI %s: %w", op, l.key(), err)
	}
	if st, err := l.h.State(ctx, l.domain); err == nil {
		l.last = st
	}
	return l.statusLocked(), nil
}

// vncSocket is the VNC socket of the defined domain, "" before.
func (l *Launcher) vncSocket() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.domain == "" || l.final != nil {
		return ""
	}
	return l.opts.VNCSocket
}

// removeDirs removes the launcher's directories. The domain's helpers may
// still write into them just after the domain is gone (virtlogd flushing
// the serial log of a killed QEMU, the VNC socket of a QEMU that did not
// exit cleanly), so a directory that reappears within a second is removed
// again.
func removeDirs(log klog.Logger, dirs []string) {
	for attempt := 0; attempt < 10; attempt++ {
		left := false
		for _, d := range dirs {
			if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
				continue
			}
			left = true
			if err := os.RemoveAll(d); err != nil && attempt == 9 {
				log.Error(err, "removing", "path", d)
			}
		}
		if !left && attempt > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chooseAcceleration sets opts.Emulation from the hypervisor's domain
// capabilities: KVM where it reports KVM usable for the guest's
// architecture, else TCG when Config.Emulation allows it.
func (l *Launcher) chooseAcceleration(ctx context.Context, vmi *v1.VirtualMachineInstance, opts *domainxml.Options) error {
	arch, err := domainxml.LibvirtArch(vmi, opts)
	if err != nil {
		return err
	}
	if l.cfg.ForceEmulation {
		opts.Emulation = true
		return nil
	}
	kvm, err := l.h.KVMSupported(ctx, arch)
	if err != nil {
		return fmt.Errorf("asking the hypervisor whether KVM runs %s guests: %w", arch, err)
	}
	switch {
	case kvm:
		opts.Emulation = false
	case l.cfg.Emulation:
		opts.Emulation = true
	default:
		return fmt.Errorf("this node cannot run %s guests with KVM (the hypervisor's domain capabilities offer no domain type kvm: no usable /dev/kvm) "+
			"and software emulation is off (KubeVirt CR spec.configuration.developerConfiguration.useEmulation, virt-launcher --use-emulation)", arch)
	}
	return nil
}
