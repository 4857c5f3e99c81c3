// Package fake is an in-memory hypervisor.Hypervisor for the unit tests of
// the packages that drive one (the launcher, the node agent, localnode), as
// client-go's fake clientsets are for API clients: no libvirt, no QEMU, no
// cgo, and every call recorded.
package fake

import (
	"context"
	"fmt"
	"net"
	"sync"

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

type fakeDomain struct {
	xml       string
	uuid      string
	meta      domainxml.Metadata
	state     hypervisor.DomainState
	console   net.Conn // the guest's end of the current console session
	migration *fakeMigration
	vcpus     uint     // set by SetVCPUs; 0: the definition's
	links     []string // SetQEMULink's changes, "device=up|down"
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
