package fake

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

const testXML = `<domain type="kvm">
  <name>ns_vm</name>
  <uuid>3dfa27a8-fb76-5ad1-b2c2-78c1ff43f629</uuid>
  <metadata><vmi xmlns="https://github.com/vmkit/vmkit/domainxml/v1"><namespace>ns</namespace><name>vm</name><uid>uid-1</uid><gracePeriodSeconds>30</gracePeriodSeconds></vmi></metadata>
  <memory unit="KiB">131072</memory>
</domain>`

func defined(t *testing.T) *Hypervisor {
	t.Helper()
	f := New()
	if _, err := f.Define(context.Background(), testXML); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFakeStateMachine(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	steps := []struct {
		name    string
		call    func() error
		want    hypervisor.DomainState
		wantErr error
	}{
		{"pause a shut-off domain", func() error { return f.Pause(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonUnknown}, hypervisor.ErrInvalidState},
		{"start paused", func() error { return f.Start(ctx, "ns_vm", hypervisor.StartOptions{Paused: true}) }, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonStartingUp}, nil},
		{"start again", func() error { return f.Start(ctx, "ns_vm", hypervisor.StartOptions{}) }, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonStartingUp}, hypervisor.ErrInvalidState},
		{"resume", func() error { return f.Resume(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}, nil},
		{"resume a running domain", func() error { return f.Resume(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}, hypervisor.ErrInvalidState},
		{"reboot", func() error { return f.Reboot(ctx, "ns_vm", hypervisor.RebootACPI) }, hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}, nil},
		{"reset", func() error { return f.Reset(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}, nil},
		{"pause", func() error { return f.Pause(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonUser}, nil},
		{"reboot a paused domain", func() error { return f.Reboot(ctx, "ns_vm", hypervisor.RebootACPI) }, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonUser}, hypervisor.ErrInvalidState},
		{"reset a paused domain", func() error { return f.Reset(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonUser}, nil},
		{"undefine a paused domain", func() error { return f.Undefine(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonUser}, hypervisor.ErrInvalidState},
		{"destroy", func() error { return f.Destroy(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}, nil},
		{"destroy a shut-off domain", func() error { return f.Destroy(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}, nil},
		{"reset a shut-off domain", func() error { return f.Reset(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}, hypervisor.ErrInvalidState},
		{"start", func() error { return f.Start(ctx, "ns_vm", hypervisor.StartOptions{}) }, hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonBooted}, nil},
		{"shutdown", func() error { return f.Shutdown(ctx, "ns_vm") }, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown}, nil},
	}
	for _, s := range steps {
		err := s.call()
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil) != (err == nil) {
			t.Fatalf("%s: error %v, want %v", s.name, err, s.wantErr)
		}
		got, err := f.State(ctx, "ns_vm")
		if err != nil || got != s.want {
			t.Fatalf("%s: state %v, %v; want %v", s.name, got, err, s.want)
		}
	}
	if err := f.Undefine(ctx, "ns_vm"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.State(ctx, "ns_vm"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("State of an undefined domain: %v, want ErrNotFound", err)
	}
}

func TestFakeDefineAndList(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	d, err := f.Define(ctx, testXML) // redefining keeps the domain
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "ns_vm" || d.UUID != "3dfa27a8-fb76-5ad1-b2c2-78c1ff43f629" || d.VMI.UID != "uid-1" {
		t.Errorf("Define = %+v", d)
	}
	other := strings.Replace(testXML, "3dfa27a8", "00000000", 1)
	if _, err := f.Define(ctx, other); err == nil {
		t.Error("redefining with another UUID succeeded")
	}
	if _, err := f.Define(ctx, `<domain><name>foreign</name></domain>`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Define(ctx, `<domain`); err == nil {
		t.Error("Define of malformed XML succeeded")
	}
	for uid, want := range map[string][]string{"uid-1": {"ns_vm"}, "": {"ns_vm"}, "uid-2": nil} {
		got, err := f.List(ctx, uid)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range got {
			names = append(names, d.Name)
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", uid, diff)
		}
	}
	if xml, ok := f.XML("ns_vm"); !ok || xml != testXML {
		t.Errorf("XML = %q, %v", xml, ok)
	}
}

func TestFakeConsole(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	if _, err := f.Console(ctx, "ns_vm"); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Fatalf("Console of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	console, err := f.Console(ctx, "ns_vm")
	if err != nil {
		t.Fatal(err)
	}
	guest, ok := f.GuestConsole("ns_vm")
	if !ok {
		t.Fatal("no guest console")
	}
	go func() { _, _ = io.WriteString(guest, "login: ") }()
	buf := make([]byte, 7)
	if _, err := io.ReadFull(console, buf); err != nil || string(buf) != "login: " {
		t.Fatalf("read %q, %v", buf, err)
	}
	go func() { _, _ = io.WriteString(console, "root\n") }()
	buf = make([]byte, 5)
	if _, err := io.ReadFull(guest, buf); err != nil || string(buf) != "root\n" {
		t.Fatalf("guest read %q, %v", buf, err)
	}
	// The session ends with the domain.
	if err := f.Destroy(ctx, "ns_vm"); err != nil {
		t.Fatal(err)
	}
	if _, err := console.Read(buf); err == nil {
		t.Error("console still open after Destroy")
	}
}

func TestFakeFailures(t *testing.T) {
	f := defined(t)
	boom := errors.New("boom")
	f.FailNext("Start", boom)
	if err := f.Start(context.Background(), "ns_vm", hypervisor.StartOptions{}); err != boom {
		t.Errorf("Start = %v, want the injected error", err)
	}
	if err := f.Start(context.Background(), "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Errorf("second Start = %v, want success", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.State(ctx, "ns_vm"); !errors.Is(err, context.Canceled) {
		t.Errorf("State with a cancelled context = %v", err)
	}
	if err := f.Pause(context.Background(), "nope"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("Pause of a missing domain = %v", err)
	}
	if err := f.SetState("ns_vm", hypervisor.DomainState{State: hypervisor.StateCrashed, Reason: hypervisor.ReasonCrashed}); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background(), "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Errorf("Start of a crashed domain = %v, want success", err)
	}
	want := []string{"Define ns_vm", "Start ns_vm", "Start ns_vm", "State ns_vm", "Pause nope", "Start ns_vm"}
	if diff := cmp.Diff(want, f.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
}

func TestStopGracefully(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		ignore        bool
		wantDestroyed bool
		wantReason    hypervisor.Reason
	}{
		{"the guest shuts down", false, false, hypervisor.ReasonShutdown},
		{"the guest ignores ACPI", true, true, hypervisor.ReasonDestroyed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := defined(t)
			f.IgnoreShutdown(tc.ignore)
			if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
				t.Fatal(err)
			}
			destroyed, err := hypervisor.StopGracefully(ctx, f, "ns_vm", 50*time.Millisecond, 5*time.Millisecond)
			if err != nil || destroyed != tc.wantDestroyed {
				t.Fatalf("StopGracefully = %v, %v; want destroyed %v", destroyed, err, tc.wantDestroyed)
			}
			if st, _ := f.State(ctx, "ns_vm"); st != (hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: tc.wantReason}) {
				t.Errorf("state %v, want Shutoff (%s)", st, tc.wantReason)
			}
			// Stopping a stopped domain does nothing.
			if destroyed, err := hypervisor.StopGracefully(ctx, f, "ns_vm", time.Second, time.Millisecond); err != nil || destroyed {
				t.Errorf("second StopGracefully = %v, %v", destroyed, err)
			}
		})
	}
	f := defined(t)
	f.IgnoreShutdown(true)
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := hypervisor.StopGracefully(cctx, f, "ns_vm", time.Hour, time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("StopGracefully past its deadline = %v", err)
	}
	if _, err := hypervisor.StopGracefully(ctx, f, "missing", time.Second, time.Millisecond); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("StopGracefully of a missing domain = %v", err)
	}
}

func TestFakeGuestAgent(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	ping := `{"execute":"guest-ping"}`
	if _, err := f.GuestAgentCommand(ctx, "ns_vm", ping); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("agent command on a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.GuestAgentCommand(ctx, "ns_vm", ping); !errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("agent command without an agent: %v, want ErrAgentUnavailable", err)
	}
	f.SetGuestAgent("ns_vm", GuestAgentReplies(map[string]string{
		"guest-ping":       `{}`,
		"guest-get-osinfo": `{"id":"fedora","name":"Fedora Linux"}`,
	}))
	for _, tc := range []struct{ cmd, want, wantErr string }{
		{ping, `{"return":{}}`, ""},
		{`{"execute":"guest-get-osinfo"}`, `{"return":{"id":"fedora","name":"Fedora Linux"}}`, ""},
		{`{"execute":"guest-get-users"}`, "", "guest-get-users has not been found"},
		{`not json`, "", "malformed command"},
	} {
		got, err := f.GuestAgentCommand(ctx, "ns_vm", tc.cmd)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("GuestAgentCommand(%s) = %q, %v; want %q, error containing %q", tc.cmd, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := f.GuestAgentCommand(ctx, "ns_other", ping); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("agent command on an unknown domain: %v, want ErrNotFound", err)
	}
	f.FailNext("GuestAgentCommand", errors.New("injected"))
	if _, err := f.GuestAgentCommand(ctx, "ns_vm", ping); err == nil || err.Error() != "injected" {
		t.Errorf("FailNext: %v, want the injected error", err)
	}
	f.SetGuestAgent("ns_vm", nil)
	if _, err := f.GuestAgentCommand(ctx, "ns_vm", ping); !errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("agent command after the agent was removed: %v, want ErrAgentUnavailable", err)
	}
}

// Reboot through the guest agent sends the agent libvirt's guest-shutdown;
// without an agent it fails as libvirt does.
func TestFakeReboot(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Reboot(ctx, "ns_vm", hypervisor.RebootGuestAgent); !errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("Reboot through a missing agent: %v, want ErrAgentUnavailable", err)
	}
	var got []string
	f.SetGuestAgent("ns_vm", func(cmd string) (string, error) { got = append(got, cmd); return `{"return":{}}`, nil })
	if err := f.Reboot(ctx, "ns_vm", hypervisor.RebootGuestAgent); err != nil {
		t.Errorf("Reboot through the agent: %v", err)
	}
	if err := f.Reboot(ctx, "ns_vm", hypervisor.RebootACPI); err != nil {
		t.Errorf("Reboot with ACPI: %v", err)
	}
	if want := []string{`{"execute":"guest-shutdown","arguments":{"mode":"reboot"}}`}; !cmp.Equal(got, want) {
		t.Errorf("the agent got %q, want %q", got, want)
	}
	if err := f.Reboot(ctx, "ns_vm", "Magic"); err == nil {
		t.Error("Reboot with an unknown method: no error")
	}
	if st, _ := f.State(ctx, "ns_vm"); st.State != hypervisor.StateRunning {
		t.Errorf("after the reboots: %v, want Running", st)
	}
	if calls := strings.Count(strings.Join(f.Calls(), ","), "Reboot ns_vm"); calls != 4 {
		t.Errorf("Calls records %d reboots, want 4: %v", calls, f.Calls())
	}
}

// Reset leaves the domain as it was, records the call and takes injected
// errors, as the other methods do.
func TestFakeReset(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	if err := f.Reset(ctx, "nope"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("Reset of a missing domain: %v, want ErrNotFound", err)
	}
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	f.FailNext("Reset", boom)
	if err := f.Reset(ctx, "ns_vm"); err != boom {
		t.Errorf("Reset = %v, want the injected error", err)
	}
	if err := f.Reset(ctx, "ns_vm"); err != nil {
		t.Errorf("Reset of a running domain: %v", err)
	}
	if st, _ := f.State(ctx, "ns_vm"); st != (hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonBooted}) {
		t.Errorf("after the reset: %v, want still Running (Booted)", st)
	}
	want := []string{"Define ns_vm", "Reset nope", "Start ns_vm", "Reset ns_vm", "Reset ns_vm", "State ns_vm"}
	if diff := cmp.Diff(want, f.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
}

// The Hypervisor has statistics for active domains only: by default the
// domain's memory and one vCPU per vCPU of its definition, else what
// SetStats set.
func TestFakeStats(t *testing.T) {
	ctx := context.Background()
	f := defined(t)
	if _, err := f.Stats(ctx, "ns_vm"); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Stats of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if _, err := f.Stats(ctx, "ns_other"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("Stats of an undefined domain: %v, want ErrNotFound", err)
	}
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{Paused: true}); err != nil {
		t.Fatal(err)
	}
	got, err := f.Stats(ctx, "ns_vm")
	if err != nil {
		t.Fatal(err)
	}
	mem := uint64(128 << 20)
	if diff := cmp.Diff(hypervisor.DomainStats{Memory: hypervisor.MemoryStats{DomainBytes: &mem}}, got); diff != "" {
		t.Errorf("default Stats (-want +got):\n%s", diff)
	}
	cpu := uint64(5e9)
	set := hypervisor.DomainStats{CPU: hypervisor.CPUStats{TimeNs: &cpu}, VCPUs: []hypervisor.VCPUStats{{ID: 0, State: hypervisor.VCPURunning, TimeNs: &cpu}}}
	f.SetStats("ns_vm", set)
	if got, err := f.Stats(ctx, "ns_vm"); err != nil || !cmp.Equal(got, set) {
		t.Errorf("Stats after SetStats = %+v, %v; want %+v", got, err, set)
	}
	f.FailNext("Stats", errors.New("boom"))
	if _, err := f.Stats(ctx, "ns_vm"); err == nil || err.Error() != "boom" {
		t.Errorf("Stats after FailNext: %v, want boom", err)
	}
}

// SetVCPUs on the Hypervisor checks the count against the definition's <vcpu>
// and an active domain, and VCPUs reads it back.
func TestFakeSetVCPUs(t *testing.T) {
	ctx := context.Background()
	f := New()
	xml := strings.Replace(testXML, "</domain>", `<vcpu placement="static" current="1">4</vcpu></domain>`, 1)
	if _, err := f.Define(ctx, xml); err != nil {
		t.Fatal(err)
	}
	if err := f.SetVCPUs(ctx, "ns_vm", 2); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("SetVCPUs of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if n, err := f.VCPUs("ns_vm"); n != 1 || err != nil {
		t.Errorf("VCPUs = %d, %v; want the definition's current 1", n, err)
	}
	if err := f.Start(ctx, "ns_vm", hypervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []uint{0, 5} {
		if err := f.SetVCPUs(ctx, "ns_vm", bad); err == nil {
			t.Errorf("SetVCPUs(%d) succeeded", bad)
		}
	}
	if err := f.SetVCPUs(ctx, "ns_vm", 3); err != nil {
		t.Fatal(err)
	}
	if n, err := f.VCPUs("ns_vm"); n != 3 || err != nil {
		t.Errorf("VCPUs = %d, %v; want 3", n, err)
	}
}
