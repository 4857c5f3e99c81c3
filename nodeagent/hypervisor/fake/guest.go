package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// GuestAgentFunc plays a QEMU guest agent for the Hypervisor: it gets a command's
// JSON and returns the agent's JSON reply, or an error as
// Hypervisor.GuestAgentCommand would (ErrAgentUnavailable when the agent
// does not answer).
type GuestAgentFunc func(command string) (string, error)

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

func (d *fakeDomain) closeConsole() {
	if d.console != nil {
		_ = d.console.Close()
		d.console = nil
	}
}
