package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// DefaultGuestAgentTimeout bounds one guest agent command unless
// Config.GuestAgentTimeout says otherwise: an agent that has not answered by
// then is taken as not connected.
const DefaultGuestAgentTimeout = 5 * time.Second

// IsGuestAgentCommand reports whether the launcher runs the QEMU guest agent
// command for its clients. Only commands that read the guest's state and
// take no arguments are allowed: the command socket must not become a way to
// run programs in the guest, write its files or change its users.
func IsGuestAgentCommand(command string) bool {
	switch command {
	case "guest-ping", "guest-info", "guest-get-osinfo", "guest-get-host-name",
		"guest-get-timezone", "guest-get-users", "guest-get-fsinfo",
		"guest-network-get-interfaces":
		return true
	}
	return false
}

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
	if !IsGuestAgentCommand(command) {
		return nil, fmt.Errorf("%w: %q", errNotAllowed, command)
	}
	l.mu.Lock()
	domain, started, final := l.domain, l.started, l.final != nil
	l.mu.Unlock()
	switch {
	case final:
		return nil, errFinal
	case !started:
		return nil, fmt.Errorf("%s on VMI %s: the domain has not started: %w", command, l.key(), hypervisor.ErrInvalidState)
	}
	// Not under l.mu: the agent may take its time, and the state poll and
	// lifecycle commands must not wait for it.
	timeout := l.cfg.GuestAgentTimeout
	if timeout <= 0 {
		timeout = DefaultGuestAgentTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := l.h.GuestAgentCommand(ctx, domain, `{"execute":"`+command+`"}`)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, hypervisor.ErrAgentUnavailable) {
			err = fmt.Errorf("%w: no answer in %v", hypervisor.ErrAgentUnavailable, timeout)
		}
		return nil, fmt.Errorf("%s on VMI %s: %w", command, l.key(), err)
	}
	return parseAgentReply(command, out)
}

// parseAgentReply returns the "return" member of a QMP reply, or the
// agent's error.
func parseAgentReply(command, reply string) (json.RawMessage, error) {
	var r struct {
		Return json.RawMessage `json:"return"`
		Error  *struct {
			Class string `json:"class"`
			Desc  string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(reply), &r); err != nil {
		return nil, fmt.Errorf("%s: malformed guest agent reply %.200q: %w", command, reply, err)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("%s: guest agent error %s: %s", command, r.Error.Class, r.Error.Desc)
	}
	if len(r.Return) == 0 {
		return nil, fmt.Errorf("%s: guest agent reply without a return value: %.200q", command, reply)
	}
	return r.Return, nil
}
