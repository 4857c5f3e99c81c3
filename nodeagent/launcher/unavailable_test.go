package launcher

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// TestLibvirtOutageKeepsGuestAndStop: while libvirt is down the guest is
// reported as it was, with a message naming libvirt, commands fail naming
// it, and a stop requested meanwhile is neither lost nor recorded as done:
// it takes effect when libvirt is back.
func TestLibvirtOutageKeepsGuestAndStop(t *testing.T) {
	var kills atomic.Int32
	f := startWith(t, func(c *Config) {
		c.HypervisorTimeout = time.Minute
		c.KillDomain = func(context.Context) error { kills.Add(1); return nil }
	})
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	f.h.SetUnavailable(true)
	waitFor(t, func() bool { return strings.Contains(f.l.Status().Message, "libvirt unavailable") })
	if st := f.l.Status(); st.State != hypervisor.StateRunning || st.Final {
		t.Errorf("status during the outage %+v, want the running domain", st)
	}
	if _, err := f.c.Pause(ctx); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("Pause during the outage: %v, want an error saying libvirt is unavailable", err)
	}
	if _, err := f.c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	st := f.l.Status()
	if st.Final || !st.StopRequested {
		t.Fatalf("status after a stop during the outage %+v: want the stop pending, not final", st)
	}

	f.h.SetUnavailable(false)
	select {
	case final := <-f.run:
		if !final.Succeeded() || !final.StopRequested {
			t.Errorf("final status %+v, want the requested stop done", final)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stop did not take effect after libvirt came back")
	}
	if n := kills.Load(); n != 0 {
		t.Errorf("KillDomain called %d times, want 0: libvirt came back", n)
	}
}

// TestLibvirtOutageThenBack: commands work again once libvirt answers.
func TestLibvirtOutageThenBack(t *testing.T) {
	f := startWith(t, func(c *Config) { c.HypervisorTimeout = time.Minute })
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	f.h.SetUnavailable(true)
	waitFor(t, func() bool { return f.l.Status().Message != "" })
	f.h.SetUnavailable(false)
	waitFor(t, func() bool { return f.l.Status().Message == "" })
	st, err := f.c.Pause(ctx)
	if err != nil || st.State != hypervisor.StatePaused {
		t.Fatalf("Pause after the outage: %+v, %v", st, err)
	}
	if st, err := f.c.Unpause(ctx); err != nil || st.State != hypervisor.StateRunning {
		t.Fatalf("Unpause after the outage: %+v, %v", st, err)
	}
}

// TestLibvirtOutageGivesUp: libvirt unavailable past the timeout, with a
// stop pending, ends the launcher with reason LibvirtUnavailable after it
// killed the guest without libvirt.
func TestLibvirtOutageGivesUp(t *testing.T) {
	var kills atomic.Int32
	f := startWith(t, func(c *Config) {
		c.HypervisorTimeout = 500 * time.Millisecond
		c.KillDomain = func(context.Context) error { kills.Add(1); return nil }
	})
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	f.h.SetUnavailable(true)
	start := time.Now()
	if _, err := f.c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	var final client.Status
	select {
	case final = <-f.run:
	case <-time.After(5 * time.Second):
		t.Fatal("the launcher did not give the domain up")
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout", d)
	}
	if final.Reason != hypervisor.ReasonLibvirtUnavailable || final.State != hypervisor.StateShutoff || final.Succeeded() {
		t.Errorf("final %+v, want Shutoff (LibvirtUnavailable), not a success", final)
	}
	if !strings.Contains(final.Message, "libvirt") || !strings.Contains(final.Message, "killed the guest") {
		t.Errorf("final message %q, want it to name libvirt and the kill", final.Message)
	}
	if n := kills.Load(); n != 1 {
		t.Errorf("KillDomain called %d times, want 1", n)
	}
	onDisk, err := client.ReadFinal(f.cfg.ShareDir, f.cfg.UID)
	if err != nil || onDisk.Reason != hypervisor.ReasonLibvirtUnavailable {
		t.Errorf("final.json %+v, %v", onDisk, err)
	}
}

// TestHypervisorLost: only ErrUnavailable starts an outage; any answer ends it.
func TestHypervisorLost(t *testing.T) {
	l := &Launcher{cfg: Config{HypervisorTimeout: 20 * time.Millisecond}}
	down := errors.Join(errors.New("state x"), hypervisor.ErrUnavailable)
	if l.hypervisorLost(down) {
		t.Fatal("lost at the first failure")
	}
	time.Sleep(30 * time.Millisecond)
	if l.hypervisorLost(context.DeadlineExceeded) {
		t.Error("a timed-out call counts as lost")
	}
	if !l.hypervisorLost(down) {
		t.Error("not lost past the timeout")
	}
	l.hypervisorLost(hypervisor.ErrNotFound) // libvirt answered
	if l.hypervisorLost(down) {
		t.Error("an answer did not end the outage")
	}
}
