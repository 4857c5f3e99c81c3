package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fsAgent plays qemu-ga's file system freeze commands and counts them.
type fsAgent struct {
	mu      sync.Mutex
	frozen  bool
	freezes int
	thaws   int
}

func (a *fsAgent) answer(command string) (string, error) {
	var cmd struct {
		Execute string `json:"execute"`
	}
	if err := json.Unmarshal([]byte(command), &cmd); err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch cmd.Execute {
	case "guest-fsfreeze-status":
		if a.frozen {
			return `{"return":"frozen"}`, nil
		}
		return `{"return":"thawed"}`, nil
	case "guest-fsfreeze-freeze":
		a.frozen = true
		a.freezes++
		return `{"return":2}`, nil
	case "guest-fsfreeze-thaw":
		a.frozen = false
		a.thaws++
		return `{"return":2}`, nil
	}
	return `{"error":{"class":"CommandNotFound","desc":"The command ` + cmd.Execute + ` has not been found"}}`, nil
}

// state returns whether the file systems are frozen and how many freezes
// and thaws the agent ran.
func (a *fsAgent) state() (frozen bool, freezes, thaws int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.frozen, a.freezes, a.thaws
}

// Freeze and Unfreeze run the guest agent's commands once, leave frozen or
// thawed file systems alone, and an unfreeze timeout thaws the guest unless
// Unfreeze or a newer Freeze came first.
func TestLauncherFreeze(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	var le *client.Error
	if _, err := f.c.Freeze(ctx, 0); !errors.As(err, &le) || le.Code != 409 || errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("Freeze before the domain started: %v, want a 409 that is not AgentUnavailable", err)
	}
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if _, err := f.c.Freeze(ctx, 0); !errors.Is(err, hypervisor.ErrAgentUnavailable) || !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("Freeze without a guest agent: %v, want 409 AgentUnavailable", err)
	}
	if _, err := f.c.Unfreeze(ctx); !errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("Unfreeze without a guest agent: %v, want AgentUnavailable", err)
	}

	agent := &fsAgent{}
	f.h.SetGuestAgent("ns_vm1", agent.answer)
	want := func(step string, frozen bool, freezes, thaws int) {
		t.Helper()
		if gf, gfr, gt := agent.state(); gf != frozen || gfr != freezes || gt != thaws {
			t.Errorf("after %s: frozen %v, %d freezes, %d thaws; want %v, %d, %d", step, gf, gfr, gt, frozen, freezes, thaws)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := f.c.Freeze(ctx, 0); err != nil {
			t.Fatalf("Freeze: %v", err)
		}
	}
	want("two freezes", true, 1, 0)
	for i := 0; i < 2; i++ {
		if _, err := f.c.Unfreeze(ctx); err != nil {
			t.Fatalf("Unfreeze: %v", err)
		}
	}
	want("two unfreezes", false, 1, 1)

	// The unfreeze timeout thaws the guest.
	if _, err := f.c.Freeze(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want("a freeze with a timeout", true, 2, 1)
	waitFor(t, func() bool { frozen, _, _ := agent.state(); return !frozen })
	want("the unfreeze timeout", false, 2, 2)

	// Unfreeze cancels it, and so does a newer Freeze without one.
	if _, err := f.c.Freeze(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Unfreeze(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Freeze(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Freeze(ctx, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	want("unfreeze and a freeze without a timeout cancelling timeouts", true, 4, 3)
	if _, err := f.c.Unfreeze(ctx); err != nil {
		t.Fatal(err)
	}

	// The body is optional; a negative timeout or garbage is a 400.
	for _, tc := range []struct {
		body string
		code int
	}{
		{"", http.StatusOK},
		{`{"unfreezeTimeout":"-1s"}`, http.StatusBadRequest},
		{`{"unfreezeTimeout":"soon"}`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodPut, "http://launcher/v1/freeze", strings.NewReader(tc.body))
		resp, err := f.do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("PUT /v1/freeze %q: %d, want %d", tc.body, resp.StatusCode, tc.code)
		}
	}
	want("the freeze without a body", true, 5, 4)
}

// SoftReboot asks the hypervisor the requested way; the guest agent gets
// guest-shutdown with mode reboot, and a missing agent, a paused domain or
// disabled ACPI are 409s.
func TestLauncherSoftReboot(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	var le *client.Error
	if _, err := f.c.SoftReboot(ctx, hypervisor.RebootACPI); !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("SoftReboot before the domain started: %v, want a 409", err)
	}
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if st, err := f.c.SoftReboot(ctx, hypervisor.RebootACPI); err != nil || st.State != hypervisor.StateRunning {
		t.Errorf("SoftReboot with ACPI: %+v, %v; want the domain running", st, err)
	}
	if _, err := f.c.SoftReboot(ctx, hypervisor.RebootGuestAgent); !errors.Is(err, hypervisor.ErrAgentUnavailable) || !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("SoftReboot through a missing guest agent: %v, want 409 AgentUnavailable", err)
	}
	var got []string
	var mu sync.Mutex
	f.h.SetGuestAgent("ns_vm1", func(cmd string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, cmd)
		return `{"return":{}}`, nil
	})
	if _, err := f.c.SoftReboot(ctx, hypervisor.RebootGuestAgent); err != nil {
		t.Errorf("SoftReboot through the guest agent: %v", err)
	}
	mu.Lock()
	if len(got) != 1 || !strings.Contains(got[0], `"guest-shutdown","arguments":{"mode":"reboot"}`) {
		t.Errorf("the guest agent got %q, want guest-shutdown with mode reboot", got)
	}
	mu.Unlock()
	if _, err := f.c.SoftReboot(ctx, "Kick"); !errors.As(err, &le) || le.Code != 400 {
		t.Errorf("SoftReboot with an unknown method: %v, want a 400", err)
	}
	if _, err := f.c.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.SoftReboot(ctx, hypervisor.RebootACPI); !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("SoftReboot of a paused domain: %v, want a 409", err)
	}
	if n := strings.Count(strings.Join(f.h.Calls(), ","), "Reboot ns_vm1"); n != 4 {
		t.Errorf("the hypervisor got %d reboots, want 4 (ACPI, agent twice, paused): %v", n, f.h.Calls())
	}
	req, _ := http.NewRequest(http.MethodPut, "http://launcher/v1/softreboot", bytes.NewReader([]byte("{")))
	if resp, err := f.do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("PUT /v1/softreboot with a broken body: %v, %v; want 400", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A VMI that disables ACPI cannot be soft rebooted without its guest agent:
// the launcher refuses before the hypervisor sees it.
func TestLauncherSoftRebootWithoutACPI(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	vmi := testVMI()
	vmi.Spec.Domain.Features = &v1.Features{ACPI: v1.FeatureState{Enabled: v1.BoolPtr(false)}}
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	var le *client.Error
	if _, err := f.c.SoftReboot(ctx, hypervisor.RebootACPI); !errors.As(err, &le) || le.Code != 409 || !strings.Contains(le.Message, "ACPI is disabled") {
		t.Errorf("SoftReboot with ACPI disabled: %v, want a 409 naming ACPI", err)
	}
	if strings.Contains(strings.Join(f.h.Calls(), ","), "Reboot") {
		t.Errorf("the hypervisor was asked to reboot: %v", f.h.Calls())
	}
}

// Reset resets the started domain through the hypervisor, running or
// paused, leaving its state as it was; before the domain started or after
// it ended it is a 409, and the hypervisor's failure a 500 naming the VMI.
func TestLauncherReset(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	resets := func() int { return strings.Count(strings.Join(f.h.Calls(), ","), "Reset ns_vm1") }
	var le *client.Error
	if _, err := f.c.Reset(ctx); !errors.As(err, &le) || le.Code != 409 || !strings.Contains(le.Message, "ns/vm1") {
		t.Errorf("Reset before the domain started: %v, want a 409 naming the VMI", err)
	}
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if st, err := f.c.Reset(ctx); err != nil || st.State != hypervisor.StateRunning {
		t.Errorf("Reset: %+v, %v; want the domain running", st, err)
	}
	if _, err := f.c.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := f.c.Reset(ctx); err != nil || st.State != hypervisor.StatePaused {
		t.Errorf("Reset of the paused domain: %+v, %v; want it reset and still paused", st, err)
	}
	if _, err := f.c.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	f.h.FailNext("Reset", errors.New("QEMU is wedged"))
	if _, err := f.c.Reset(ctx); !errors.As(err, &le) || le.Code != 500 || !strings.Contains(le.Message, "reset VMI ns/vm1: QEMU is wedged") {
		t.Errorf("Reset the hypervisor failed: %v, want a 500 naming the VMI and the cause", err)
	}
	if n := resets(); n != 3 {
		t.Errorf("the hypervisor got %d resets, want 3 (running, paused, failed): %v", n, f.h.Calls())
	}
	if _, err := f.c.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	<-f.run
	if _, err := f.l.Reset(ctx); !errors.Is(err, errFinal) {
		t.Errorf("Reset after the domain ended: %v, want errFinal", err)
	}
	if n := resets(); n != 3 {
		t.Errorf("the hypervisor got %d resets after the domain ended, want still 3", n)
	}
}
