package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/qga"
)

// errNotAllowed: a guest agent command outside IsGuestAgentCommand's list.
var errNotAllowed = errors.New("guest agent command not allowed")

// GuestAgentCommand runs an allowed guest agent command (see
// IsGuestAgentCommand) in the running domain and returns the value the
// agent returned, as JSON: {} for guest-ping, an object for
// guest-get-osinfo, an array for guest-get-users. It waits at most
// Config.GuestAgentTimeout. It fails with an error for which errors.Is reports
// hypervisor.ErrAgentUnavailable when no agent answers, and
// hypervisor.ErrInvalidState when the domain does not run.
func (l *Launcher) GuestAgentCommand(ctx context.Context, command string) (json.RawMessage, error) {
	if !client.IsGuestAgentCommand(command) {
		return nil, fmt.Errorf("%w: %q", errNotAllowed, command)
	}
	return l.agentCommand(ctx, command, l.agentTimeout())
}

// agentTimeout is Config.GuestAgentTimeout or its default.
func (l *Launcher) agentTimeout() time.Duration {
	if l.cfg.GuestAgentTimeout > 0 {
		return l.cfg.GuestAgentTimeout
	}
	return client.DefaultGuestAgentTimeout
}

// agentCommand runs a guest agent command without arguments, whatever it
// is, waiting at most timeout for the agent; see GuestAgentCommand.
func (l *Launcher) agentCommand(ctx context.Context, command string, timeout time.Duration) (json.RawMessage, error) {
	domain, err := l.startedDomain(command)
	if err != nil {
		return nil, err
	}
	// Not under l.mu: the agent may take its time, and the state poll and
	// lifecycle commands must not wait for it.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := l.h.GuestAgentCommand(ctx, domain, `{"execute":"`+command+`"}`)
	if err != nil {
		return nil, fmt.Errorf("%s on VMI %s: %w", command, l.key(), qga.TimedOut(err, timeout))
	}
	return qga.ParseReply(command, out)
}

// startedDomain returns the name of the started domain, or the error for
// op on a domain that has not started (hypervisor.ErrInvalidState) or has
// ended (errFinal).
func (l *Launcher) startedDomain(op string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.final != nil:
		return "", errFinal
	case !l.started:
		return "", fmt.Errorf("%s on VMI %s: the domain has not started: %w", op, l.key(), hypervisor.ErrInvalidState)
	}
	return l.domain, nil
}

// agentCall runs a guest agent command with arguments, for the launcher's
// own use (never for its clients: see IsGuestAgentCommand).
func (l *Launcher) agentCall(ctx context.Context, command string, args any) error {
	domain, err := l.startedDomain(command)
	if err != nil {
		return err
	}
	b, err := qga.Request(command, args)
	if err != nil {
		return err
	}
	timeout := l.agentTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := l.h.GuestAgentCommand(ctx, domain, b)
	if err != nil {
		return fmt.Errorf("%s: %w", command, qga.TimedOut(err, timeout))
	}
	_, err = qga.ParseReply(command, out)
	return err
}
