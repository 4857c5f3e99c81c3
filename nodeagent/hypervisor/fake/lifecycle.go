package fake

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

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
