package launcher

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// execAgent plays a guest agent that runs guest-exec commands: each
// command's exit code and output come from run, and the command's status
// reports it exited after polls guest-exec-status calls.
type execAgent struct {
	mu    sync.Mutex
	polls int
	run   func(path string, args []string) (code int, out string)
	ran   [][]string
	left  map[int64]int
	code  map[int64]int
	out   map[int64]string
	next  int64
}

func (a *execAgent) reply(command string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var req struct {
		Execute   string `json:"execute"`
		Arguments struct {
			Path          string   `json:"path"`
			Arg           []string `json:"arg"`
			CaptureOutput bool     `json:"capture-output"`
			PID           int64    `json:"pid"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(command), &req); err != nil {
		return "", err
	}
	switch req.Execute {
	case "guest-ping":
		return `{"return":{}}`, nil
	case "guest-exec":
		if !req.Arguments.CaptureOutput {
			return `{"error":{"class":"GenericError","desc":"no capture"}}`, nil
		}
		a.next++
		a.ran = append(a.ran, append([]string{req.Arguments.Path}, req.Arguments.Arg...))
		code, out := a.run(req.Arguments.Path, req.Arguments.Arg)
		a.left[a.next], a.code[a.next], a.out[a.next] = a.polls, code, out
		return `{"return":{"pid":` + jsonInt(a.next) + `}}`, nil
	case "guest-exec-status":
		pid := req.Arguments.PID
		if a.left[pid] > 0 {
			a.left[pid]--
			return `{"return":{"exited":false}}`, nil
		}
		return `{"return":{"exited":true,"exitcode":` + jsonInt(int64(a.code[pid])) + `,"out-data":"` + base64.StdEncoding.EncodeToString([]byte(a.out[pid])) + `"}}`, nil
	}
	return `{"error":{"class":"CommandNotFound","desc":"The command ` + req.Execute + ` has not been found"}}`, nil
}

func jsonInt(i int64) string { b, _ := json.Marshal(i); return string(b) }

// TestLauncherProbes: the VMI's exec and guestAgentPing probes run through
// the guest agent; only the spec's command runs; a migration or a pause
// skips them; a VMI without such a probe is a 400.
func TestLauncherProbes(t *testing.T) {
	f := start(t)
	ctx := context.Background()

	vmi := testVMI()
	vmi.Spec.ReadinessProbe = &v1.Probe{Exec: &corev1.ExecAction{Command: []string{"/bin/test", "-f", "/run/ready"}}}
	vmi.Spec.LivenessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}}

	// Before the sync there is no guest to ask.
	if r, err := f.c.Probe(ctx, client.ProbeReadiness, time.Second); err != nil || r.Success || !strings.Contains(r.Message, "not been synced") {
		t.Errorf("probe before the sync = %+v, %v; want a failure naming the missing sync", r, err)
	}
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// No agent in the guest: both fail.
	for _, kind := range []client.ProbeKind{client.ProbeReadiness, client.ProbeLiveness} {
		if r, err := f.c.Probe(ctx, kind, time.Second); err != nil || r.Success || !strings.Contains(r.Message, hypervisor.ErrAgentUnavailable.Error()) {
			t.Errorf("%s probe without an agent = %+v, %v; want a failure naming the agent", kind, r, err)
		}
	}

	ready := false
	agent := &execAgent{polls: 2, left: map[int64]int{}, code: map[int64]int{}, out: map[int64]string{},
		run: func(path string, args []string) (int, string) {
			if ready {
				return 0, ""
			}
			return 1, "no /run/ready\n"
		}}
	f.h.SetGuestAgent("ns_vm1", agent.reply)
	r, err := f.c.Probe(ctx, client.ProbeReadiness, time.Second)
	if err != nil || r.Success || r.ExitCode != 1 || r.Output != "no /run/ready\n" || !strings.Contains(r.Message, "exited with 1") {
		t.Errorf("failing exec probe = %+v, %v; want exit code 1 with the output", r, err)
	}
	ready = true
	if r, err := f.c.Probe(ctx, client.ProbeReadiness, time.Second); err != nil || !r.Success || r.ExitCode != 0 {
		t.Errorf("passing exec probe = %+v, %v; want success", r, err)
	}
	want := []string{"/bin/test", "-f", "/run/ready"}
	for _, ran := range agent.ran {
		if strings.Join(ran, " ") != strings.Join(want, " ") {
			t.Errorf("the guest ran %q, want only the spec's %q", ran, want)
		}
	}
	if r, err := f.c.Probe(ctx, client.ProbeLiveness, time.Second); err != nil || !r.Success {
		t.Errorf("guestAgentPing probe = %+v, %v; want success", r, err)
	}

	// A command that does not exit in time fails the probe within it.
	agent.mu.Lock()
	agent.polls = 1 << 30
	agent.mu.Unlock()
	begin := time.Now()
	if r, err := f.c.Probe(ctx, client.ProbeReadiness, time.Second); err != nil || r.Success || !strings.Contains(r.Message, "did not exit") || time.Since(begin) > 3*time.Second {
		t.Errorf("hanging exec probe = %+v, %v after %v; want a failure after 1s", r, err, time.Since(begin))
	}

	// A guest paused on request is not probed.
	f.h.SetGuestAgent("ns_vm1", func(string) (string, error) { return "", hypervisor.ErrAgentUnavailable })
	if _, err := f.c.Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if r, err := f.c.Probe(ctx, client.ProbeLiveness, time.Second); err != nil || !r.Success || !strings.Contains(r.Message, "paused") {
		t.Errorf("probe of a paused guest = %+v, %v; want a skipped success", r, err)
	}
	if _, err := f.c.Unpause(ctx); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	if r, err := f.c.Probe(ctx, client.ProbeLiveness, time.Second); err != nil || r.Success {
		t.Errorf("probe of a running guest without an agent = %+v, %v; want a failure", r, err)
	}

	// Probes the launcher does not run: a 400 naming the probe.
	var le *client.Error
	if _, err := f.c.Probe(ctx, "startup", time.Second); !errors.As(err, &le) || le.Code != 400 {
		t.Errorf("startup probe: %v, want a 400", err)
	}
	vmi.Spec.LivenessProbe = nil
	f.l.mu.Lock()
	f.l.vmi = vmi
	f.l.mu.Unlock()
	if _, err := f.c.Probe(ctx, client.ProbeLiveness, time.Second); !errors.As(err, &le) || le.Code != 400 || !strings.Contains(err.Error(), "no liveness probe") {
		t.Errorf("liveness probe of a VMI without one: %v, want a 400 naming it", err)
	}
}

// TestLauncherProbeSkippedWhileMigrating: on a migration target waiting for
// its guest the probe passes without asking an agent.
func TestLauncherProbeSkippedWhileMigrating(t *testing.T) {
	f := start(t)
	vmi := testVMI()
	vmi.Spec.LivenessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}}
	f.l.mu.Lock()
	f.l.vmi, f.l.incoming = vmi, "ns_vm1"
	f.l.mu.Unlock()
	r, err := f.l.Probe(context.Background(), client.ProbeLiveness, time.Second)
	if err != nil || !r.Success || !strings.Contains(r.Message, "migration") {
		t.Errorf("probe on a migration target = %+v, %v; want a skipped success", r, err)
	}
}

// TestLauncherTerminated: a launcher told to stop by its process (the
// kubelet's SIGTERM, for a failed liveness probe or a deleted pod) before
// anyone asked through the socket says so in its final status; one the
// node agent stopped first does not.
func TestLauncherTerminated(t *testing.T) {
	for _, asked := range []bool{false, true} {
		f := start(t)
		ctx := context.Background()
		if _, err := f.c.Sync(ctx, testVMI()); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if asked {
			if _, err := f.c.Kill(ctx); err != nil {
				t.Fatalf("Kill: %v", err)
			}
		}
		f.cancel()
		select {
		case st := <-f.run:
			if !st.Final || st.Terminated == asked {
				t.Errorf("stop asked through the socket %v: final status %+v, want Final and Terminated %v", asked, st, !asked)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return")
		}
	}
}
