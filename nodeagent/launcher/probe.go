package launcher

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// maxProbeOutput bounds ProbeResult.Output, as the kubelet bounds an exec
// probe's output.
const maxProbeOutput = 10 << 10

// errNoSuchProbe: the VMI has no probe of that kind that runs through the
// guest agent.
var errNoSuchProbe = errors.New("no such probe")

// execPoll is how often an exec probe asks the guest agent whether its
// command ended.
const execPoll = 100 * time.Millisecond

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
	return l.guestExec(ctx, probe.Exec.Command, timeout), nil
}

// guestExec runs argv in the guest through the agent and waits for it to
// exit, at most timeout in all.
func (l *Launcher) guestExec(ctx context.Context, argv []string, timeout time.Duration) client.ProbeResult {
	domain, err := l.startedDomain("guest-exec")
	if err != nil {
		return client.ProbeResult{Message: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := func(command string, args any, into any) error {
		b, err := agentRequest(command, args)
		if err != nil {
			return err
		}
		out, err := l.h.GuestAgentCommand(ctx, domain, b)
		if err != nil {
			return fmt.Errorf("%s on VMI %s: %w", command, l.key(), agentTimedOut(err, timeout))
		}
		ret, err := parseAgentReply(command, out)
		if err != nil {
			return err
		}
		return json.Unmarshal(ret, into)
	}
	var started struct {
		PID int64 `json:"pid"`
	}
	if err := call("guest-exec", struct {
		Path          string   `json:"path"`
		Arg           []string `json:"arg,omitempty"`
		CaptureOutput bool     `json:"capture-output"`
	}{argv[0], argv[1:], true}, &started); err != nil {
		return client.ProbeResult{Message: err.Error()}
	}
	for {
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode *int   `json:"exitcode"`
			Signal   *int   `json:"signal"`
			OutData  string `json:"out-data"`
			ErrData  string `json:"err-data"`
		}
		if err := call("guest-exec-status", struct {
			PID int64 `json:"pid"`
		}{started.PID}, &st); err != nil {
			return client.ProbeResult{Message: err.Error()}
		}
		if st.Exited {
			r := client.ProbeResult{Output: decodeOutput(st.OutData) + decodeOutput(st.ErrData)}
			if len(r.Output) > maxProbeOutput {
				r.Output = r.Output[:maxProbeOutput]
			}
			switch {
			case st.ExitCode != nil:
				r.ExitCode = *st.ExitCode
				r.Success = r.ExitCode == 0
				if !r.Success {
					r.Message = fmt.Sprintf("%q exited with %d in the guest", argv[0], r.ExitCode)
				}
			case st.Signal != nil:
				r.ExitCode = 128 + *st.Signal
				r.Message = fmt.Sprintf("%q was killed by signal %d in the guest", argv[0], *st.Signal)
			default:
				r.ExitCode = 1
				r.Message = fmt.Sprintf("%q ended in the guest without an exit code", argv[0])
			}
			return r
		}
		select {
		case <-ctx.Done():
			return client.ProbeResult{Message: fmt.Sprintf("%q did not exit in the guest within %v", argv[0], timeout)}
		case <-time.After(execPoll):
		}
	}
}

// decodeOutput decodes the agent's base64 output, or returns it as it came.
func decodeOutput(s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return s
	}
	return string(b)
}
