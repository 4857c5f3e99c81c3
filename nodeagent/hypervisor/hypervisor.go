// Package hypervisor is the small interface the node agent and the launcher
// need from a hypervisor: define a domain from its XML, start it (optionally
// paused), shut it down gracefully or destroy it, pause and resume it, ask
// the guest to reboot or reset it, read its state with the reason and its statistics
// (DomainStats), attach to its serial console, talk to the QEMU guest agent
// in it, undefine it, and find the domains of a VMI.
//
// Domains are named by their libvirt name (<namespace>_<name>, see
// domainxml.Convert) and tied to their VMI by the metadata domainxml writes,
// which List reads back, so a restarted node agent finds its domains without
// state of its own.
//
// Every method takes a context; implementations bound each call by a timeout
// even when the context has no deadline. The libvirt implementation lives in
// the subpackage libvirt, the only package of the module that uses cgo;
// the subpackage fake is an in-memory implementation for unit tests of the
// packages that use this one (as client-go's fake clientsets are).
package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
)

// Hypervisor manages the domains of one node.
type Hypervisor interface {
	// Define creates the domain described by domainXML, or replaces the
	// definition of the domain of the same name and UUID. A running domain
	// keeps running with its old definition until it restarts.
	Define(ctx context.Context, domainXML string) (Domain, error)
	// Start boots a defined domain that is shut off; with opts.Paused its
	// vCPUs stay stopped until Resume. Starting a running domain fails with
	// ErrInvalidState.
	Start(ctx context.Context, name string, opts StartOptions) error
	// Shutdown asks the guest to power off (an ACPI power button press) and
	// returns without waiting; the guest may ignore it. See StopGracefully.
	Shutdown(ctx context.Context, name string) error
	// Destroy stops a domain at once, like pulling the power cord. A domain
	// that is already shut off is left alone: Destroy returns nil.
	Destroy(ctx context.Context, name string) error
	// Pause stops the vCPUs of a running domain.
	Pause(ctx context.Context, name string) error
	// Resume restarts the vCPUs of a paused domain.
	Resume(ctx context.Context, name string) error
	// Reboot asks the guest of a running domain to restart, the way method
	// says, and returns without waiting; the guest may ignore an ACPI
	// request. Rebooting a domain that is not running (paused, shut off)
	// fails with ErrInvalidState; through the guest agent, an agent that
	// does not answer fails it with ErrAgentUnavailable.
	Reboot(ctx context.Context, name string, method RebootMethod) error
	// Reset resets the virtual machine of an active domain at once, like
	// the reset button of a PC: the guest restarts from its firmware
	// without shutting down, in the same hypervisor process (KubeVirt's
	// reset, libvirt's virDomainReset). A paused domain is reset and stays
	// paused. Resetting a domain that is not active (shut off) fails with
	// ErrInvalidState.
	Reset(ctx context.Context, name string) error
	// SetVCPUs hot-plugs (or unplugs) vCPUs of an active domain so its
	// guest has count of them, within the maximum its definition allows
	// (<vcpu current=...>, domainxml's maxSockets): KubeVirt's CPU hotplug,
	// libvirt's virDomainSetVcpusFlags(VIR_DOMAIN_AFFECT_LIVE). A domain
	// that is not active fails with ErrInvalidState; a count of 0 or above
	// the maximum fails naming both.
	SetVCPUs(ctx context.Context, name string, count uint) error
	// SetPluggedMemory asks the guest of an active domain to plug bytes of
	// memory through the domain's virtio-mem device (domainxml's maxGuest),
	// on top of the memory it booted with: KubeVirt's memory hotplug,
	// libvirt's virDomainUpdateDeviceFlags of the device's <requested>. The
	// guest plugs the memory in its own time (PluggedMemory reads how far it
	// got). A domain without a virtio-mem device, or bytes above its size
	// or not a multiple of its block, fails naming them; a domain that is
	// not active fails with ErrInvalidState.
	SetPluggedMemory(ctx context.Context, name string, bytes uint64) error
	// PluggedMemory returns the virtio-mem device of an active domain: the
	// memory requested and the memory the guest has plugged. A domain
	// without such a device returns ErrNoPluggableMemory.
	PluggedMemory(ctx context.Context, name string) (PluggedMemory, error)
	// State returns the domain's state and why it is in it.
	State(ctx context.Context, name string) (DomainState, error)
	// AttachDisk hot-plugs a disk, given as libvirt's <disk> XML, into the
	// running (or paused) domain and into its definition. The disk's alias
	// (ua-<disk name>) names it for DetachDisk.
	AttachDisk(ctx context.Context, name, diskXML string) error
	// DetachDisk asks the running domain to unplug the disk of the given
	// alias, live and from its definition. It returns once asked: a guest
	// may take a moment to release a PCI device; Disks says when it is gone.
	DetachDisk(ctx context.Context, name, alias string) error
	// Disks returns the disks of the running domain, as its live XML has
	// them.
	Disks(ctx context.Context, name string) ([]libvirtxml.DomainDisk, error)
	// MemoryDump writes the guest memory of the running domain to the file
	// path (libvirt's memory-only core dump, raw format: what crash and
	// volatility read), and returns when it is written.
	MemoryDump(ctx context.Context, name, path string) error
	// DiskCapacity returns the size in bytes the running domain's guest
	// sees of the disk with the given target (vda, sda).
	DiskCapacity(ctx context.Context, name, target string) (uint64, error)
	// ResizeDisk grows the disk with the given target of the running
	// domain to size bytes (a raw image file is extended; a block device
	// must already be that large) and tells the guest, which sees the new
	// capacity at once: KubeVirt's ExpandDisks.
	ResizeDisk(ctx context.Context, name, target string, size uint64) error
	// Stats returns the statistics of an active (running or paused)
	// domain: CPU, memory, vCPUs, network interfaces and disks. A domain
	// that is shut off fails with ErrInvalidState.
	Stats(ctx context.Context, name string) (DomainStats, error)
	// Console attaches to the domain's serial console: reads return what the
	// guest prints, writes type into it. Only one console session exists per
	// domain; a new one takes over from the old. The context bounds only the
	// attach; Close ends the session.
	Console(ctx context.Context, name string) (io.ReadWriteCloser, error)
	// Undefine removes the definition of a domain that is shut off, with its
	// EFI NVRAM. Undefining a running domain fails with ErrInvalidState.
	Undefine(ctx context.Context, name string) error
	// GuestAgentCommand sends one command to the QEMU guest agent in the
	// running domain, as QMP JSON ({"execute": "guest-ping"}), and returns
	// the agent's JSON reply ({"return": ...}). It fails with
	// ErrAgentUnavailable when no agent answers (the domain has no agent
	// channel, no agent runs in the guest, or it did not answer before the
	// context's deadline) and with ErrInvalidState when the domain is not
	// running.
	GuestAgentCommand(ctx context.Context, name, command string) (string, error)
	// KVMSupported reports whether guests of the given architecture
	// (libvirt's name, such as "x86_64") can run with hardware acceleration
	// (domain type "kvm"), as the hypervisor's domain capabilities say: false
	// on a node without a usable /dev/kvm or with a QEMU that cannot use it.
	// Callers fall back to emulation (domain type "qemu") only where the
	// cluster allows it.
	KVMSupported(ctx context.Context, arch string) (bool, error)
	// List returns the domains created from the VMI with the given UID, or
	// every domain created from a VMI when vmiUID is empty. Domains without
	// vmkit metadata are left out.
	List(ctx context.Context, vmiUID string) ([]Domain, error)
}

// PluggedMemory is the state of a domain's virtio-mem device, in bytes.
type PluggedMemory struct {
	// Size is the most the device can plug (maxGuest minus the boot memory).
	Size uint64
	// Requested is what the guest was asked to plug.
	Requested uint64
	// Plugged is what the guest has plugged.
	Plugged uint64
}

// ErrNoPluggableMemory: the domain has no virtio-mem device (no maxGuest).
var ErrNoPluggableMemory = errors.New("the domain has no virtio-mem device")

// StartOptions modify Start.
type StartOptions struct {
	// Paused starts the domain with its vCPUs stopped, for example to attach
	// the console before the guest prints its first line.
	Paused bool
}

// RebootMethod says how Reboot asks a guest to restart (KubeVirt's soft
// reboot: the guest agent when it is connected, else ACPI).
type RebootMethod string

// Reboot methods.
const (
	// RebootGuestAgent asks the QEMU guest agent in the guest
	// (guest-shutdown with mode reboot), which restarts the guest's OS.
	RebootGuestAgent RebootMethod = "GuestAgent"
	// RebootACPI presses the ACPI power button; when the guest then powers
	// off, the hypervisor boots it again instead of ending the domain.
	RebootACPI RebootMethod = "ACPI"
)

// Domain is a defined domain.
type Domain struct {
	// Name is the libvirt name, <namespace>_<name> of the VMI.
	Name string
	// UUID is the domain's UUID.
	UUID string
	// VMI identifies the VMI the domain was created from.
	VMI domainxml.Metadata
	// State is the domain's state when it was listed or defined.
	State DomainState
}

// DomainState is a domain's state and the reason for it.
type DomainState struct {
	State  State
	Reason Reason
}

func (s DomainState) String() string { return string(s.State) + " (" + string(s.Reason) + ")" }

// State is the life-cycle state of a domain, as libvirt reports it.
type State string

// Domain states.
const (
	StateNoState      State = "NoState"
	StateRunning      State = "Running"
	StateBlocked      State = "Blocked"
	StatePaused       State = "Paused"
	StateShuttingDown State = "ShuttingDown"
	StateShutoff      State = "Shutoff"
	StateCrashed      State = "Crashed"
	StatePMSuspended  State = "PMSuspended"
)

// Reason says why a domain is in its state. Which reasons occur depends on
// the state: a running domain was Booted or Unpaused, a paused one paused
// by the User or StartingUp (started paused), a shut-off one Shutdown by
// the guest, Destroyed, or Crashed.
type Reason string

// Reasons.
const (
	ReasonUnknown    Reason = "Unknown"
	ReasonBooted     Reason = "Booted"
	ReasonMigrated   Reason = "Migrated"
	ReasonRestored   Reason = "Restored"
	ReasonUnpaused   Reason = "Unpaused"
	ReasonUser       Reason = "User"
	ReasonStartingUp Reason = "StartingUp"
	ReasonIOError    Reason = "IOError"
	ReasonWatchdog   Reason = "Watchdog"
	ReasonShutdown   Reason = "Shutdown"
	ReasonDestroyed  Reason = "Destroyed"
	ReasonCrashed    Reason = "Crashed"
	ReasonFailed     Reason = "Failed"
	ReasonSaved      Reason = "Saved"
	ReasonDaemon     Reason = "Daemon"
	// ReasonLibvirtUnavailable is not libvirt's: a launcher whose libvirt
	// stayed unreachable (ErrUnavailable) past its timeout killed the
	// guest and ended with it.
	ReasonLibvirtUnavailable Reason = "LibvirtUnavailable"
)

// Errors that callers act on; implementations wrap them with the operation
// and domain name.
var (
	// ErrNotFound: no domain of that name is defined.
	ErrNotFound = errors.New("domain not found")
	// ErrInvalidState: the operation does not apply to the domain in its
	// current state (pausing a shut-off domain, starting a running one).
	ErrInvalidState = errors.New("operation invalid in the domain's state")
	// ErrAgentUnavailable: no QEMU guest agent answers in the domain.
	ErrAgentUnavailable = errors.New("guest agent not connected")
	// ErrUnavailable: the hypervisor's daemon does not answer (libvirtd
	// is not running or restarting); the domain may still run.
	ErrUnavailable = errors.New("hypervisor unavailable")
)

// DefaultCallTimeout bounds a hypervisor call whose context has no deadline.
const DefaultCallTimeout = 30 * time.Second

// StopGracefully asks the guest to shut down and waits up to grace for the
// domain to shut off, polling its state every poll; then it destroys the
// domain. It reports whether the domain had to be destroyed. A domain that
// is already shut off is left alone.
func StopGracefully(ctx context.Context, h Hypervisor, name string, grace, poll time.Duration) (destroyed bool, err error) {
	st, err := h.State(ctx, name)
	if err != nil {
		return false, err
	}
	if st.State == StateShutoff {
		return false, nil
	}
	if err := h.Shutdown(ctx, name); err != nil && !errors.Is(err, ErrInvalidState) {
		return false, err
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		st, err := h.State(ctx, name)
		if err != nil {
			return false, err
		}
		if st.State == StateShutoff {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("stop %s: %w", name, ctx.Err())
		case <-deadline.C:
			if err := h.Destroy(ctx, name); err != nil {
				return false, err
			}
			return true, nil
		case <-tick.C:
		}
	}
}
