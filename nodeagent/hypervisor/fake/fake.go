// Package fake is an in-memory hypervisor.Hypervisor for the unit tests of
// the packages that drive one (the launcher, the node agent, localnode), as
// client-go's fake clientsets are for API clients: no libvirt, no QEMU, no
// cgo, and every call recorded.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"

	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// Hypervisor is an in-memory hypervisor.Hypervisor for unit tests. It follows
// libvirt's state machine (start only from shut off, pause only when running, ...) without
// running anything, records every call, and lets a test inject errors, make
// the guest ignore shutdown requests, change a domain's state as a guest
// would (power off, crash) and play the guest's side of the console.
//
// The zero value is not usable; create one with New. A Hypervisor is safe for
// concurrent use.
type Hypervisor struct {
	mu             sync.Mutex
	domains        map[string]*fakeDomain
	calls          []string
	failNext       map[string]error
	unavailable    bool // see SetUnavailable
	ignoreShutdown bool
	agents         map[string]GuestAgentFunc
	stats          map[string]hypervisor.DomainStats
	kvm            bool
	migrationGate  chan struct{}                        // see HoldMigrations
	lastMigration  map[string]hypervisor.MigrateOptions // see LastMigration
}

// GuestAgentFunc plays a QEMU guest agent for the Hypervisor: it gets a command's
// JSON and returns the agent's JSON reply, or an error as
// Hypervisor.GuestAgentCommand would (ErrAgentUnavailable when the agent
// does not answer).
type GuestAgentFunc func(command string) (string, error)

type fakeDomain struct {
	xml       string
	uuid      string
	meta      domainxml.Metadata
	state     hypervisor.DomainState
	console   net.Conn // the guest's end of the current console session
	migration *fakeMigration
	vcpus     uint // set by SetVCPUs; 0: the definition's
	// plugged: set by SetPluggedMemory (a Hypervisor's guest plugs at once).
	plugged *uint64
	// capacities: the disk sizes ResizeDisk set, by target.
	capacities map[string]uint64
}

var _ hypervisor.Hypervisor = (*Hypervisor)(nil)

// SetKVM sets what KVMSupported answers for every architecture; a new Hypervisor
// has no KVM.
func (f *Hypervisor) SetKVM(supported bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kvm = supported
}

// KVMSupported implements Hypervisor: what SetKVM set.
func (f *Hypervisor) KVMSupported(ctx context.Context, arch string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "KVMSupported", arch); err != nil {
		return false, err
	}
	return f.kvm, nil
}

// New returns a Hypervisor with no domains.
func New() *Hypervisor {
	return &Hypervisor{domains: map[string]*fakeDomain{}, failNext: map[string]error{}, agents: map[string]GuestAgentFunc{}, stats: map[string]hypervisor.DomainStats{}}
}

// SetStats sets what Stats returns for the named domain while it is
// active, as the guest's activity would make libvirt count it. Without
// it, Stats reports the domain's memory and one running vCPU per vCPU of
// its definition, with nothing counted yet.
func (f *Hypervisor) SetStats(name string, st hypervisor.DomainStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[name] = st
}

// FailNext makes the next call of the named method ("Define", "Start",
// "Shutdown", "Destroy", "Pause", "Resume", "Reboot", "Reset", "State",
// "Stats", "Console", "GuestAgentCommand", "Undefine" or "List") return err
// without doing anything.
func (f *Hypervisor) FailNext(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[method] = err
}

// SetUnavailable makes every call fail with an error matching
// ErrUnavailable, as calls fail while libvirtd is down, until it is set
// back to false; the domains keep their state, as QEMU keeps running.
func (f *Hypervisor) SetUnavailable(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unavailable = down
}

// SetGuestAgent makes agent answer the guest agent commands of the named
// domain while it runs, as qemu-ga in the guest would; nil removes the
// agent, so commands fail with ErrAgentUnavailable. The agent outlives
// redefinitions of the domain. See GuestAgentReplies.
func (f *Hypervisor) SetGuestAgent(name string, agent GuestAgentFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if agent == nil {
		delete(f.agents, name)
		return
	}
	f.agents[name] = agent
}

// GuestAgentReplies returns a GuestAgentFunc that answers each command by
// its "execute" name with {"return": replies[name]}; replies holds JSON
// values. A command it has no reply for gets the error qemu-ga returns
// for an unknown command.
func GuestAgentReplies(replies map[string]string) GuestAgentFunc {
	return func(command string) (string, error) {
		var cmd struct {
			Execute string `json:"execute"`
		}
		if err := json.Unmarshal([]byte(command), &cmd); err != nil {
			return "", fmt.Errorf("guest agent: malformed command %q: %w", command, err)
		}
		r, ok := replies[cmd.Execute]
		if !ok {
			return "", fmt.Errorf("internal error: unable to execute QEMU agent command '%s': The command %s has not been found", cmd.Execute, cmd.Execute)
		}
		return `{"return":` + r + `}`, nil
	}
}

// IgnoreShutdown makes guests ignore Shutdown, as a guest without ACPI
// support does; Destroy still stops them.
func (f *Hypervisor) IgnoreShutdown(ignore bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ignoreShutdown = ignore
}

// SetState puts a domain in a state, as the guest or QEMU would: a guest
// powering itself off, a crash.
func (f *Hypervisor) SetState(name string, st hypervisor.DomainState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.domains[name]
	if !ok {
		return fmt.Errorf("set state of %s: %w", name, hypervisor.ErrNotFound)
	}
	d.state = st
	if st.State == hypervisor.StateShutoff {
		d.closeConsole()
	}
	return nil
}

// Calls returns the calls made so far, as "Method name" ("List uid" for
// List), oldest first.
func (f *Hypervisor) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// XML returns the definition of a domain.
func (f *Hypervisor) XML(name string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.domains[name]
	if !ok {
		return "", false
	}
	return d.xml, true
}

// GuestConsole returns the guest's side of the domain's current console
// session: what a test writes to it, the session's reader reads.
func (f *Hypervisor) GuestConsole(name string) (io.ReadWriter, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.domains[name]
	if !ok || d.console == nil {
		return nil, false
	}
	return d.console, true
}

// begin records a call and returns the error to fail it with, if any.
func (f *Hypervisor) begin(ctx context.Context, method, arg string) error {
	f.calls = append(f.calls, method+" "+arg)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", method, arg, err)
	}
	if f.unavailable {
		return fmt.Errorf("%s %s: fake libvirt is down: %w", method, arg, hypervisor.ErrUnavailable)
	}
	if err, ok := f.failNext[method]; ok {
		delete(f.failNext, method)
		return err
	}
	return nil
}

// lookup returns the named domain or ErrNotFound.
func (f *Hypervisor) lookup(method, name string) (*fakeDomain, error) {
	d, ok := f.domains[name]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", method, name, hypervisor.ErrNotFound)
	}
	return d, nil
}

// Define implements Hypervisor.
func (f *Hypervisor) Define(ctx context.Context, domainXML string) (hypervisor.Domain, error) {
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(domainXML); err != nil {
		return hypervisor.Domain{}, fmt.Errorf("define: parse domain XML: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Define", dom.Name); err != nil {
		return hypervisor.Domain{}, err
	}
	if dom.Name == "" {
		return hypervisor.Domain{}, errors.New("define: domain XML has no name")
	}
	meta, err := domainxml.ParseMetadata(&dom)
	if err != nil && !errors.Is(err, domainxml.ErrNoMetadata) {
		return hypervisor.Domain{}, fmt.Errorf("define %s: %w", dom.Name, err)
	}
	d, ok := f.domains[dom.Name]
	switch {
	case !ok:
		uuid := dom.UUID
		if uuid == "" {
			uuid = fmt.Sprintf("00000000-0000-4000-8000-%012x", len(f.domains)+1)
		}
		d = &fakeDomain{uuid: uuid, state: hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonUnknown}}
		f.domains[dom.Name] = d
	case dom.UUID != "" && dom.UUID != d.uuid:
		return hypervisor.Domain{}, fmt.Errorf("define %s: domain already exists with UUID %s", dom.Name, d.uuid)
	}
	d.xml, d.meta = domainXML, meta
	return hypervisor.Domain{Name: dom.Name, UUID: d.uuid, VMI: meta, State: d.state}, nil
}

// Start implements Hypervisor.
func (f *Hypervisor) Start(ctx context.Context, name string, opts hypervisor.StartOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Start", name); err != nil {
		return err
	}
	d, err := f.lookup("start", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateShutoff && d.state.State != hypervisor.StateCrashed {
		return fmt.Errorf("start %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	d.state = hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonBooted}
	if opts.Paused {
		d.state = hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonStartingUp}
	}
	return nil
}

// Shutdown implements Hypervisor.
func (f *Hypervisor) Shutdown(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Shutdown", name); err != nil {
		return err
	}
	d, err := f.lookup("shutdown", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateRunning {
		return fmt.Errorf("shutdown %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	if !f.ignoreShutdown {
		d.state = hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown}
		d.closeConsole()
	}
	return nil
}

// Destroy implements Hypervisor.
func (f *Hypervisor) Destroy(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Destroy", name); err != nil {
		return err
	}
	d, err := f.lookup("destroy", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateShutoff {
		d.state = hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}
		d.closeConsole()
	}
	return nil
}

// Pause implements Hypervisor.
func (f *Hypervisor) Pause(ctx context.Context, name string) error {
	return f.transition(ctx, "Pause", name, hypervisor.StateRunning, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonUser})
}

// Resume implements Hypervisor.
func (f *Hypervisor) Resume(ctx context.Context, name string) error {
	return f.transition(ctx, "Resume", name, hypervisor.StatePaused, hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused})
}

// rebootCommand is what Reboot with RebootGuestAgent sends the guest agent,
// as libvirt does.
const rebootCommand = `{"execute":"guest-shutdown","arguments":{"mode":"reboot"}}`

// Reboot implements Hypervisor. The domain keeps running, as after a real
// reboot; Calls records "Reboot name". With RebootGuestAgent the domain's
// agent (SetGuestAgent) gets guest-shutdown with mode reboot, and its error,
// if any, is Reboot's; without an agent Reboot fails with
// ErrAgentUnavailable.
func (f *Hypervisor) Reboot(ctx context.Context, name string, method hypervisor.RebootMethod) error {
	f.mu.Lock()
	if err := f.begin(ctx, "Reboot", name); err != nil {
		f.mu.Unlock()
		return err
	}
	d, err := f.lookup("reboot", name)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	if d.state.State != hypervisor.StateRunning {
		f.mu.Unlock()
		return fmt.Errorf("reboot %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	agent := f.agents[name]
	f.mu.Unlock()
	switch method {
	case hypervisor.RebootACPI:
		return nil
	case hypervisor.RebootGuestAgent:
		if agent == nil {
			return fmt.Errorf("reboot %s: %w", name, hypervisor.ErrAgentUnavailable)
		}
		if _, err := agent(rebootCommand); err != nil {
			return fmt.Errorf("reboot %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("reboot %s: unknown method %q", name, method)
}

// Reset implements Hypervisor. A running or paused domain keeps its state,
// as QEMU keeps running and the guest boots again; Calls records
// "Reset name".
func (f *Hypervisor) Reset(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Reset", name); err != nil {
		return err
	}
	d, err := f.lookup("reset", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateRunning && d.state.State != hypervisor.StatePaused {
		return fmt.Errorf("reset %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	return nil
}

// SetVCPUs implements Hypervisor: it checks count against the maximum of
// the domain's <vcpu> and records it (VCPUs reads it back); Calls records
// "SetVCPUs name".
func (f *Hypervisor) SetVCPUs(ctx context.Context, name string, count uint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "SetVCPUs", name); err != nil {
		return err
	}
	d, err := f.lookup("set vCPUs of", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateRunning && d.state.State != hypervisor.StatePaused {
		return fmt.Errorf("set vCPUs of %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil || dom.VCPU == nil {
		return fmt.Errorf("set vCPUs of %s: the domain's XML has no <vcpu> (%v)", name, err)
	}
	if count == 0 || count > dom.VCPU.Value {
		return fmt.Errorf("set vCPUs of %s: %d vCPUs: the domain has 1 to %d", name, count, dom.VCPU.Value)
	}
	d.vcpus = count
	return nil
}

// AttachDisk implements Hypervisor: the disk joins the domain's XML at
// once; its alias must be new.
func (f *Hypervisor) AttachDisk(ctx context.Context, name, diskXML string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "AttachDisk", name); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("attach a disk to", name)
	if err != nil {
		return err
	}
	var disk libvirtxml.DomainDisk
	if err := disk.Unmarshal(diskXML); err != nil {
		return fmt.Errorf("attach a disk to %s: parse disk XML: %w", name, err)
	}
	if disk.Alias == nil || disk.Target == nil {
		return fmt.Errorf("attach a disk to %s: the disk has no alias or target", name)
	}
	for _, have := range dom.Devices.Disks {
		if have.Alias != nil && have.Alias.Name == disk.Alias.Name || have.Target != nil && have.Target.Dev == disk.Target.Dev {
			return fmt.Errorf("attach a disk to %s: alias %s or target %s already in use", name, disk.Alias.Name, disk.Target.Dev)
		}
	}
	dom.Devices.Disks = append(dom.Devices.Disks, disk)
	return f.storeXML(d, dom)
}

// DetachDisk implements Hypervisor: the disk leaves the domain's XML at
// once (a Hypervisor's guest releases it without delay).
func (f *Hypervisor) DetachDisk(ctx context.Context, name, alias string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "DetachDisk", name); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("detach a disk from", name)
	if err != nil {
		return err
	}
	for i, have := range dom.Devices.Disks {
		if have.Alias != nil && have.Alias.Name == alias {
			dom.Devices.Disks = append(dom.Devices.Disks[:i], dom.Devices.Disks[i+1:]...)
			return f.storeXML(d, dom)
		}
	}
	return fmt.Errorf("detach a disk from %s: no device with alias %s: %w", name, alias, hypervisor.ErrNotFound)
}

// MemoryDump implements Hypervisor: the file gets the domain's name and
// memory size, a stand-in for the guest's memory.
func (f *Hypervisor) MemoryDump(ctx context.Context, name, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "MemoryDump", name); err != nil {
		return err
	}
	_, dom, err := f.liveDomain("dump the memory of", name)
	if err != nil {
		return err
	}
	memory := "no <memory>"
	if dom.Memory != nil {
		memory = fmt.Sprintf("%d %s", dom.Memory.Value, dom.Memory.Unit)
	}
	return os.WriteFile(path, []byte(fmt.Sprintf("fake memory dump of %s: %s\n", name, memory)), 0o644)
}

// DiskCapacity implements Hypervisor: the size ResizeDisk last set, else
// the size of the disk's source file or device, else 0.
func (f *Hypervisor) DiskCapacity(ctx context.Context, name, target string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "DiskCapacity", name); err != nil {
		return 0, err
	}
	d, dom, err := f.liveDomain("read the disk capacity of", name)
	if err != nil {
		return 0, err
	}
	if size, ok := d.capacities[target]; ok {
		return size, nil
	}
	for _, disk := range dom.Devices.Disks {
		if disk.Target == nil || disk.Target.Dev != target {
			continue
		}
		if disk.Source != nil && disk.Source.File != nil {
			if fi, err := os.Stat(disk.Source.File.File); err == nil {
				return uint64(fi.Size()), nil
			}
		}
		return 0, nil
	}
	return 0, fmt.Errorf("read the disk capacity of %s: no disk %s: %w", name, target, hypervisor.ErrNotFound)
}

// ResizeDisk implements Hypervisor: DiskCapacity reports size from now on,
// and a source file is extended to it, as QEMU does.
func (f *Hypervisor) ResizeDisk(ctx context.Context, name, target string, size uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "ResizeDisk", name); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("resize a disk of", name)
	if err != nil {
		return err
	}
	for _, disk := range dom.Devices.Disks {
		if disk.Target == nil || disk.Target.Dev != target {
			continue
		}
		if disk.Source != nil && disk.Source.File != nil {
			if err := os.Truncate(disk.Source.File.File, int64(size)); err != nil {
				return fmt.Errorf("resize a disk of %s: %w", name, err)
			}
		}
		if d.capacities == nil {
			d.capacities = map[string]uint64{}
		}
		d.capacities[target] = size
		return nil
	}
	return fmt.Errorf("resize a disk of %s: no disk %s: %w", name, target, hypervisor.ErrNotFound)
}

// Disks implements Hypervisor.
func (f *Hypervisor) Disks(ctx context.Context, name string) ([]libvirtxml.DomainDisk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Disks", name); err != nil {
		return nil, err
	}
	_, dom, err := f.liveDomain("list the disks of", name)
	if err != nil {
		return nil, err
	}
	return dom.Devices.Disks, nil
}

// liveDomain is the named running or paused domain and its parsed XML.
func (f *Hypervisor) liveDomain(op, name string) (*fakeDomain, *libvirtxml.Domain, error) {
	d, err := f.lookup(op, name)
	if err != nil {
		return nil, nil, err
	}
	if d.state.State != hypervisor.StateRunning && d.state.State != hypervisor.StatePaused {
		return nil, nil, fmt.Errorf("%s %s: domain is %s: %w", op, name, d.state.State, hypervisor.ErrInvalidState)
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil {
		return nil, nil, fmt.Errorf("%s %s: the domain's XML: %w", op, name, err)
	}
	if dom.Devices == nil {
		dom.Devices = &libvirtxml.DomainDeviceList{}
	}
	return d, &dom, nil
}

// storeXML keeps dom as d's XML.
func (f *Hypervisor) storeXML(d *fakeDomain, dom *libvirtxml.Domain) error {
	out, err := dom.Marshal()
	if err != nil {
		return err
	}
	d.xml = out
	return nil
}

// SetPluggedMemory implements Hypervisor: it checks bytes against the
// domain's virtio-mem device and plugs them at once; Calls records
// "SetPluggedMemory name".
func (f *Hypervisor) SetPluggedMemory(ctx context.Context, name string, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "SetPluggedMemory", name); err != nil {
		return err
	}
	d, dev, err := f.virtioMem("plug memory of", name)
	if err != nil {
		return err
	}
	if err := hypervisor.CheckPluggable(dev, bytes); err != nil {
		return fmt.Errorf("plug memory of %s: %w", name, err)
	}
	d.plugged = &bytes
	return nil
}

// PluggedMemory implements Hypervisor; Calls records "PluggedMemory name".
func (f *Hypervisor) PluggedMemory(ctx context.Context, name string) (hypervisor.PluggedMemory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "PluggedMemory", name); err != nil {
		return hypervisor.PluggedMemory{}, err
	}
	d, dev, err := f.virtioMem("read plugged memory of", name)
	if err != nil {
		return hypervisor.PluggedMemory{}, err
	}
	m := hypervisor.PluggedMemory{Size: hypervisor.SizeBytes(dev.Target.Size.Value, dev.Target.Size.Unit)}
	if r := dev.Target.Requested; r != nil {
		m.Requested = hypervisor.SizeBytes(r.Value, r.Unit)
	}
	if d.plugged != nil {
		m.Requested = *d.plugged
	}
	m.Plugged = m.Requested
	return m, nil
}

// virtioMem returns an active domain and its virtio-mem device.
func (f *Hypervisor) virtioMem(op, name string) (*fakeDomain, *libvirtxml.DomainMemorydev, error) {
	d, dom, err := f.liveDomain(op, name)
	if err != nil {
		return nil, nil, err
	}
	dev := hypervisor.VirtioMem(dom)
	if dev == nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, name, hypervisor.ErrNoPluggableMemory)
	}
	return d, dev, nil
}

// VCPUs returns the vCPU count SetVCPUs last set on the domain, else the
// current count of its definition.
func (f *Hypervisor) VCPUs(name string) (uint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookup("vCPUs of", name)
	if err != nil {
		return 0, err
	}
	if d.vcpus != 0 {
		return d.vcpus, nil
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil || dom.VCPU == nil {
		return 0, fmt.Errorf("vCPUs of %s: the domain's XML has no <vcpu> (%v)", name, err)
	}
	if dom.VCPU.Current != 0 {
		return dom.VCPU.Current, nil
	}
	return dom.VCPU.Value, nil
}

func (f *Hypervisor) transition(ctx context.Context, method, name string, from hypervisor.State, to hypervisor.DomainState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, method, name); err != nil {
		return err
	}
	d, err := f.lookup(method, name)
	if err != nil {
		return err
	}
	if d.state.State != from {
		return fmt.Errorf("%s %s: domain is %s: %w", method, name, d.state.State, hypervisor.ErrInvalidState)
	}
	d.state = to
	return nil
}

// State implements Hypervisor.
func (f *Hypervisor) State(ctx context.Context, name string) (hypervisor.DomainState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "State", name); err != nil {
		return hypervisor.DomainState{}, err
	}
	d, err := f.lookup("state", name)
	if err != nil {
		return hypervisor.DomainState{}, err
	}
	return d.state, nil
}

// Stats implements Hypervisor with what SetStats set.
func (f *Hypervisor) Stats(ctx context.Context, name string) (hypervisor.DomainStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Stats", name); err != nil {
		return hypervisor.DomainStats{}, err
	}
	d, err := f.lookup("stats", name)
	if err != nil {
		return hypervisor.DomainStats{}, err
	}
	if d.state.State == hypervisor.StateShutoff {
		return hypervisor.DomainStats{}, fmt.Errorf("stats %s: domain is shut off: %w", name, hypervisor.ErrInvalidState)
	}
	if st, ok := f.stats[name]; ok {
		return st, nil
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("stats %s: %w", name, err)
	}
	var st hypervisor.DomainStats
	if dom.Memory != nil {
		b := hypervisor.SizeBytes(dom.Memory.Value, dom.Memory.Unit)
		st.Memory.DomainBytes = &b
	}
	if dom.VCPU != nil {
		for i := range int(dom.VCPU.Value) {
			st.VCPUs = append(st.VCPUs, hypervisor.VCPUStats{ID: i, State: hypervisor.VCPURunning})
		}
	}
	return st, nil
}

// Console implements Hypervisor.
func (f *Hypervisor) Console(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Console", name); err != nil {
		return nil, err
	}
	d, err := f.lookup("console", name)
	if err != nil {
		return nil, err
	}
	if d.state.State == hypervisor.StateShutoff {
		return nil, fmt.Errorf("console %s: domain is shut off: %w", name, hypervisor.ErrInvalidState)
	}
	d.closeConsole()
	client, guest := net.Pipe()
	d.console = guest
	return client, nil
}

// GuestAgentCommand implements Hypervisor with the agent SetGuestAgent
// gave the domain.
func (f *Hypervisor) GuestAgentCommand(ctx context.Context, name, command string) (string, error) {
	f.mu.Lock()
	if err := f.begin(ctx, "GuestAgentCommand", name); err != nil {
		f.mu.Unlock()
		return "", err
	}
	d, err := f.lookup("guest agent command on", name)
	if err != nil {
		f.mu.Unlock()
		return "", err
	}
	if d.state.State != hypervisor.StateRunning {
		f.mu.Unlock()
		return "", fmt.Errorf("guest agent command on %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	agent := f.agents[name]
	f.mu.Unlock()
	if agent == nil {
		return "", fmt.Errorf("guest agent command on %s: %w", name, hypervisor.ErrAgentUnavailable)
	}
	// Outside the lock: an agent may block as a slow guest would; the
	// context bounds the wait, as it bounds libvirt's.
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := agent(command)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("guest agent command on %s: %w", name, ctx.Err())
	}
}

// Undefine implements Hypervisor.
func (f *Hypervisor) Undefine(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Undefine", name); err != nil {
		return err
	}
	d, err := f.lookup("undefine", name)
	if err != nil {
		return err
	}
	if d.state.State != hypervisor.StateShutoff {
		return fmt.Errorf("undefine %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	delete(f.domains, name)
	return nil
}

// List implements Hypervisor.
func (f *Hypervisor) List(ctx context.Context, vmiUID string) ([]hypervisor.Domain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "List", vmiUID); err != nil {
		return nil, err
	}
	var out []hypervisor.Domain
	for name, d := range f.domains {
		if d.meta.UID == "" || (vmiUID != "" && d.meta.UID != vmiUID) {
			continue
		}
		out = append(out, hypervisor.Domain{Name: name, UUID: d.uuid, VMI: d.meta, State: d.state})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (d *fakeDomain) closeConsole() {
	if d.console != nil {
		_ = d.console.Close()
		d.console = nil
	}
}
