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
// passes libvirt's). The node agent talks to a launcher with package
// nodeagent/launcher/client, which also holds the socket's protocol and
// the types both sides exchange.
//
// Its parts live in internal packages: diskimage prepares the disks,
// accesscred the access credentials, console the serial console's
// session, qga the guest agent's protocol, passt the passtBinding's
// process, vmstate the persistent state, cpuset the host's CPUs.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/console"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/passt"
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
	// it (the image then takes the free space; see package diskimage)
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
	// feature gate; package diskimage and expanddisks.go).
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
	// when they changed (see package accesscred);
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
	final         *client.Status
	done          chan struct{} // closed when the domain ended
	console       *console.Hub
	createdAt     []string          // directories this launcher created, removed at the end
	macs          map[string]string // interface name → MAC the node agent chose
	dhcp          map[string]bool   // devices a DHCP server answers on
	passtIface    string            // the interface with the passtBinding, from the node agent
	passtArgs     []string          // passt's port arguments for it (network.PasstArgs)
	passt         *passt.Process    // the running passt (passt.go)
	steps         client.StartSteps // when the start's steps ended
	runCtx        context.Context   // ends when Run returns; DHCP servers live as long
	stopRun       context.CancelFunc
	thawTimer     *time.Timer // thaws the guest's file systems when a Freeze's unfreeze timeout passes
	thawGen       uint64      // moves on with every Freeze and Unfreeze; a timer of an older one does nothing

	accessCreds *client.AccessCredentialsStatus // the last sync of the guest-agent access credentials (accesscred.go)

	cpuTopology *v1.CPUTopology        // the guest's CPU topology, hot-plugged sockets included (hotplug.go)
	memory      *v1.MemoryStatus       // the guest's memory when it can grow (virtio-mem; hotplug.go)
	volumes     []client.HotplugVolume // the hotplugged volumes, as the last sync left them (volumehotplug.go)
	detachAsked map[string]time.Time   // hot-plugged volumes the guest was asked to release, and when
	dumps       []client.MemoryDump    // memory dumps onto memoryDump volumes (volumehotplug.go)
	claimSizes  map[string]int64       // with ExpandDisks: the claim capacities the last expansion saw (expanddisks.go)

	terminated bool // Run's context ended before a stop was requested (Status.Terminated)

	// Live migration (migrate.go).
	incoming        string                  // a migration target: the domain it waits for
	migration       *client.MigrationStatus // the last migration, as source or target
	migrating       bool                    // a migration from here is under way
	cancelMigration context.CancelFunc

	// The hypervisor's availability (unavailable.go).
	unavailableSince time.Time // first of the calls failing with ErrUnavailable since the last answer
	abandoned        bool      // given up: end makes no more hypervisor calls
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
		cfg.HotplugDiskDir = client.DefaultHotplugDiskDir
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
		console: console.New(cfg.ConsoleHistory),
		macs:    map[string]string{},
		dhcp:    map[string]bool{},
		runCtx:  runCtx,
		stopRun: stopRun,
	}, nil
}

func (l *Launcher) key() string { return l.cfg.Namespace + "/" + l.cfg.Name }

// errFinal: the domain ended; the launcher takes no more commands.
var errFinal = errors.New("the domain ended; the launcher is exiting")
