// Package qga speaks the QEMU guest agent's protocol for the launcher:
// its requests and replies (QMP), calls that ran out of time, and running
// a command in the guest to its end as an exec probe does.
package qga

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// maxProbeOutput bounds ProbeResult.Output, as the kubelet bounds an exec
// probe's output.
const maxProbeOutput = 10 << 10

// execPoll is how often an exec probe asks the guest agent whether its
// command ended.
const execPoll = 100 * time.Millisecond

// Request is the guest agent's JSON request for command with args.
func Request(command string, args any) (string, error) {
	b, err := json.Marshal(struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments"`
	}{command, args})
	return string(b), err
}

// ParseReply returns the "return" member of a QMP reply, or the
// agent's error.
func ParseReply(command, reply string) (json.RawMessage, error) {
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

// TimedOut makes a guest agent call that ran out of time an
// hypervisor.ErrAgentUnavailable: an agent that does not answer in time is
// not connected.
func TimedOut(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, hypervisor.ErrAgentUnavailable) {
		return fmt.Errorf("%w: no answer in %v", hypervisor.ErrAgentUnavailable, timeout)
	}
	return err
}

// Send sends one request to the guest agent and returns its reply: the
// hypervisor's GuestAgentCommand on the domain.
type Send func(ctx context.Context, request string) (string, error)

// Exec runs argv in the guest through the agent (guest-exec, then
// guest-exec-status every execPoll until it exits) and waits for it to
// exit, at most timeout in all, as an exec probe: it succeeds when the
// command exits with 0, and its output is cut at maxProbeOutput. vmi names
// the VMI in messages.
func Exec(ctx context.Context, send Send, vmi string, argv []string, timeout time.Duration) client.ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := func(command string, args any, into any) error {
		b, err := Request(command, args)
		if err != nil {
			return err
		}
		out, err := send(ctx, b)
		if err != nil {
			return fmt.Errorf("%s on VMI %s: %w", command, vmi, TimedOut(err, timeout))
		}
		ret, err := ParseReply(command, out)
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
