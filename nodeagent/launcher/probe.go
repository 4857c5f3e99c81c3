package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/qga"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// errNoSuchProbe: the VMI has no probe of that kind that runs through the
// guest agent.
var errNoSuchProbe = errors.New("no such probe")

// Probe runs the VMI's readiness or liveness probe that goes through the
// QEMU guest agent, as KubeVirt's virt-probe does for the launcher pod's
// exec probes: guestAgentPing sends guest-ping; exec runs the probe's
// command in the guest (guest-exec, then guest-exec-status until it exits)
// and succeeds when it exits with 0. It waits at most timeout (at least 1 s)
// for the agent and the command.
//
// Only the command of the VMI's own spec runs (the one this launcher was
// synced with), so the command socket does not become a way to run any
// program in the guest. A guest that is not running yet, or whose agent
// does not answer, fails the probe. While a migration of the guest is under
// way (on either side) the probe succeeds without asking the guest, and so
// while the guest is paused on request: a paused guest's agent does not
// answer, and a liveness probe must not end a migrating or paused guest (as
// KubeVirt's launcher). The error is for a kind the VMI has no such probe
// of.
func (l *Launcher) Probe(ctx context.Context, kind client.ProbeKind, timeout time.Duration) (client.ProbeResult, error) {
	if timeout < time.Second {
		timeout = time.Second
	}
	l.mu.Lock()
	vmi, migrating, state := l.vmi, l.incoming != "" || l.migrating, l.last
	l.mu.Unlock()
	if vmi == nil {
		return client.ProbeResult{Message: fmt.Sprintf("VMI %s: the domain has not been synced yet", l.key())}, nil
	}
	var probe *v1.Probe
	switch kind {
	case client.ProbeReadiness:
		probe = vmi.Spec.ReadinessProbe
	case client.ProbeLiveness:
		probe = vmi.Spec.LivenessProbe
	default:
		return client.ProbeResult{}, fmt.Errorf("%w: kind %q (readiness or liveness)", errNoSuchProbe, kind)
	}
	if probe == nil || (probe.Exec == nil && probe.GuestAgentPing == nil) || (probe.Exec != nil && len(probe.Exec.Command) == 0) {
		return client.ProbeResult{}, fmt.Errorf("%w: VMI %s has no %s probe through the guest agent (exec or guestAgentPing)", errNoSuchProbe, l.key(), kind)
	}
	switch {
	case migrating:
		return client.ProbeResult{Success: true, Message: "a migration is under way: probe skipped"}, nil
	case state.State == hypervisor.StatePaused && state.Reason == hypervisor.ReasonUser:
		return client.ProbeResult{Success: true, Message: "the guest is paused: probe skipped"}, nil
	}
	if probe.GuestAgentPing != nil {
		if _, err := l.agentCommand(ctx, "guest-ping", timeout); err != nil {
			return client.ProbeResult{Message: err.Error()}, nil
		}
		return client.ProbeResult{Success: true}, nil
	}
	domain, err := l.startedDomain("guest-exec")
	if err != nil {
		return client.ProbeResult{Message: err.Error()}, nil
	}
	send := func(ctx context.Context, request string) (string, error) {
		return l.h.GuestAgentCommand(ctx, domain, request)
	}
	return qga.Exec(ctx, send, l.key(), probe.Exec.Command, timeout), nil
}
