package nodeagent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestCalculateStatus(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := metav1.NewTime(now)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	vmiIn := func(p v1.VirtualMachineInstancePhase, conds ...v1.VirtualMachineInstanceCondition) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: p, NodeName: "n", Conditions: conds}}
	}
	live := func(st hypervisor.State, r hypervisor.Reason) *client.Status {
		return &client.Status{Defined: true, Started: true, State: st, Reason: r}
	}
	final := func(st hypervisor.State, r hypervisor.Reason, requested bool) *client.Status {
		return &client.Status{Defined: true, Started: true, State: st, Reason: r, Final: true, StopRequested: requested}
	}
	paused := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue,
		Reason: ReasonPausedByUser, Message: "VMI was paused by user", LastTransitionTime: ts}
	ioError := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue,
		Reason: ReasonPausedIOError, Message: "VMI was paused, low-level IO error detected", LastTransitionTime: ts}
	ioErrorBefore := ioError
	ioErrorBefore.LastTransitionTime = earlier
	ready := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier}
	enter := func(p v1.VirtualMachineInstancePhase) []v1.VirtualMachineInstancePhaseTransitionTimestamp {
		return []v1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: p, PhaseTransitionTimestamp: ts}}
	}
	tests := []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		obs  observation
		want v1.VirtualMachineInstanceStatus
	}{{
		name: "started domain makes a scheduled VMI Running",
		vmi:  vmiIn(v1.Scheduled),
		obs:  observation{launcher: live(hypervisor.StateRunning, hypervisor.ReasonUnpaused)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Running)},
	}, {
		name: "defined but not started stays Scheduled",
		vmi:  vmiIn(v1.Scheduled),
		obs:  observation{launcher: &client.Status{Defined: true, State: hypervisor.StateShutoff}},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"},
	}, {
		name: "paused by the user sets Paused and keeps Ready alone",
		vmi:  vmiIn(v1.Running, ready),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonUser)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready, paused}},
	}, {
		name: "paused by an I/O error (a full disk): Paused with reason PausedIOError, still Running",
		vmi:  vmiIn(v1.Running, ready),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonIOError)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready, ioError}},
	}, {
		name: "still paused by the I/O error: the transition time stays",
		vmi:  vmiIn(v1.Running, ioErrorBefore),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonIOError)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ioErrorBefore}},
	}, {
		name: "a user-paused guest that then hits an I/O error: the reason changes",
		vmi: vmiIn(v1.Running, func() v1.VirtualMachineInstanceCondition {
			c := paused
			c.LastTransitionTime = earlier
			return c
		}()),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonIOError)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ioErrorBefore}},
	}, {
		name: "unpaused after the I/O error: Paused goes",
		vmi:  vmiIn(v1.Running, ready, ioErrorBefore),
		obs:  observation{launcher: live(hypervisor.StateRunning, hypervisor.ReasonUnpaused)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready}},
	}, {
		name: "a scheduled VMI whose guest an I/O error paused at boot: Running and Paused",
		vmi:  vmiIn(v1.Scheduled),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonIOError)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Running),
			Conditions: []v1.VirtualMachineInstanceCondition{ioError}},
	}, {
		name: "paused for a migration's switch-over: no condition, as KubeVirt's",
		vmi:  vmiIn(v1.Running, ready),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonMigrated)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready}},
	}, {
		name: "unpaused removes Paused",
		vmi:  vmiIn(v1.Running, ready, paused),
		obs:  observation{launcher: live(hypervisor.StateRunning, hypervisor.ReasonUnpaused)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready}},
	}, {
		name: "guest shut down: Succeeded",
		vmi:  vmiIn(v1.Running),
		obs:  observation{launcher: final(hypervisor.StateShutoff, hypervisor.ReasonShutdown, false)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Succeeded)},
	}, {
		name: "destroyed on request: Succeeded",
		vmi:  vmiIn(v1.Running, paused),
		obs:  observation{launcher: final(hypervisor.StateShutoff, hypervisor.ReasonDestroyed, true)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Succeeded)},
	}, {
		name: "launcher terminated by the kubelet (a failed liveness probe): Failed",
		vmi:  vmiIn(v1.Running),
		obs: observation{launcher: &client.Status{Defined: true, Started: true, State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown,
			Final: true, StopRequested: true, Terminated: true}},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Reason: ReasonLauncherTerminated, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Failed)},
	}, {
		name: "launcher terminated while the VMI is deleted: Succeeded",
		vmi: func() *v1.VirtualMachineInstance {
			vmi := vmiIn(v1.Running)
			vmi.DeletionTimestamp = &ts
			return vmi
		}(),
		obs: observation{launcher: &client.Status{Defined: true, Started: true, State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown,
			Final: true, StopRequested: true, Terminated: true}},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Succeeded)},
	}, {
		name: "destroyed without a request: Failed",
		vmi:  vmiIn(v1.Running),
		obs:  observation{launcher: final(hypervisor.StateShutoff, hypervisor.ReasonDestroyed, false)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Reason: ReasonDomainDestroyed, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Failed)},
	}, {
		name: "crashed: Failed",
		vmi:  vmiIn(v1.Running),
		obs:  observation{launcher: final(hypervisor.StateCrashed, hypervisor.ReasonUnknown, false)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Reason: ReasonGuestCrashed, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Failed)},
	}, {
		name: "libvirt unavailable, even with a stop requested: Failed LibvirtUnavailable",
		vmi:  vmiIn(v1.Running),
		obs:  observation{launcher: final(hypervisor.StateShutoff, hypervisor.ReasonLibvirtUnavailable, true)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Reason: ReasonLibvirtUnavailable, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Failed)},
	}, {
		name: "launcher gone without a final status: Failed",
		vmi:  vmiIn(v1.Running),
		obs:  observation{launcherGone: true},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Reason: ReasonLauncherExited, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Failed)},
	}, {
		name: "final VMIs never change",
		vmi:  vmiIn(v1.Failed),
		obs:  observation{launcher: live(hypervisor.StateRunning, hypervisor.ReasonBooted)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, NodeName: "n"},
	}, {
		name: "no news changes nothing",
		vmi:  vmiIn(v1.Running, ready),
		obs:  observation{},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.now = now
			before := tt.vmi.DeepCopy()
			got := calculateStatus(tt.vmi, tt.obs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.vmi); diff != "" {
				t.Errorf("calculateStatus modified the VMI:\n%s", diff)
			}
		})
	}
}

// TestIOErrorPauseReported is the review's TestAuditIOErrorPauseNotReported
// (#35, N7) turned around: a guest QEMU paused on an I/O error
// (error_policy stop: a full disk, a lost storage backend) gives the VMI
// the Paused condition with KubeVirt's reason and message; before, the VMI
// stayed Running with no condition at all.
func TestIOErrorPauseReported(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01"}}
	st := client.Status{Started: true, State: hypervisor.StatePaused, Reason: hypervisor.ReasonIOError}
	got := calculateStatus(vmi, observation{now: time.Now(), launcher: &st})
	if got.Phase != v1.Running {
		t.Errorf("phase %s, want Running (a paused guest is Running and Paused, as in KubeVirt)", got.Phase)
	}
	c := pausedConditionOf(&got)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "PausedIOError" || c.Message != "VMI was paused, low-level IO error detected" {
		t.Fatalf("Paused condition %+v, want True PausedIOError %q; conditions %+v", c, "VMI was paused, low-level IO error detected", got.Conditions)
	}
}

func pausedConditionOf(s *v1.VirtualMachineInstanceStatus) *v1.VirtualMachineInstanceCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == v1.VirtualMachineInstancePaused {
			return &s.Conditions[i]
		}
	}
	return nil
}

// TestIOErrorEvent: KubeVirt's Warning IOerror event when the guest is
// first reported paused by an I/O error; none while it stays paused, for a
// user's pause, or for the resume; a second I/O error after a resume has
// its own.
func TestIOErrorEvent(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	a := &Agent{recorder: rec}
	paused := func(reason string) []v1.VirtualMachineInstanceCondition {
		return []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue, Reason: reason}}
	}
	const event = "Warning IOerror VM Paused due to IO error: a disk is full or its storage failed; unpause the VMI once it is fixed"
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}}
	steps := []struct {
		name string
		next []v1.VirtualMachineInstanceCondition
		want string // "" for no event
	}{
		{"running", nil, ""},
		{"paused by the user", paused(ReasonPausedByUser), ""},
		{"then by an I/O error", paused(ReasonPausedIOError), event},
		{"still paused by it", paused(ReasonPausedIOError), ""},
		{"unpaused", nil, ""},
		{"paused by an I/O error again", paused(ReasonPausedIOError), event},
	}
	for _, s := range steps {
		status := v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: s.next}
		a.ioErrorEvent(vmi, &status)
		got := ""
		select {
		case got = <-rec.Events:
		default:
		}
		if got != s.want {
			t.Errorf("%s: event %q, want %q", s.name, got, s.want)
		}
		vmi.Status = status
	}
}

func TestCalculateStatusGuestAgent(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := metav1.NewTime(now)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	running := &client.Status{Defined: true, Started: true, State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}
	connected := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue, LastTransitionTime: ts}
	connectedBefore := connected
	connectedBefore.LastTransitionTime = earlier
	ready := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier}
	fedora := v1.VirtualMachineInstanceGuestOSInfo{Name: "Fedora Linux", ID: "fedora", VersionID: "39", KernelRelease: "6.5.6-300.fc39.x86_64"}
	eth0 := []v1.VirtualMachineInstanceNetworkInterface{{InterfaceName: "eth0", MAC: "52:54:00:12:34:56", IP: "10.0.2.15", IPs: []string{"10.0.2.15"}, InfoSource: InfoSourceGuestAgent}}
	status := func(conds ...v1.VirtualMachineInstanceCondition) v1.VirtualMachineInstanceStatus {
		return v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: conds}
	}
	withInfo := func(s v1.VirtualMachineInstanceStatus) v1.VirtualMachineInstanceStatus {
		s.GuestOSInfo, s.Interfaces = fedora, eth0
		return s
	}
	tests := []struct {
		name   string
		before v1.VirtualMachineInstanceStatus
		launch *client.Status
		agent  *guestAgentInfo
		want   v1.VirtualMachineInstanceStatus
	}{{
		name:   "no poll ended yet: nothing changes",
		before: status(ready),
		launch: running,
		want:   status(ready),
	}, {
		name:   "the agent answers: AgentConnected, guestOSInfo, interfaces",
		before: status(ready),
		launch: running,
		agent:  &guestAgentInfo{connected: true, os: fedora, interfaces: eth0},
		want:   withInfo(status(ready, connected)),
	}, {
		name:   "still answering: the transition time stays",
		before: withInfo(status(connectedBefore)),
		launch: running,
		agent:  &guestAgentInfo{connected: true, os: fedora, interfaces: eth0},
		want:   withInfo(status(connectedBefore)),
	}, {
		name:   "the agent stops answering: AgentConnected goes, what it said stays",
		before: withInfo(status(ready, connectedBefore)),
		launch: running,
		agent:  &guestAgentInfo{os: fedora, interfaces: eth0},
		want:   withInfo(status(ready)),
	}, {
		name:   "an agent that reports no interfaces but the loopback clears them",
		before: withInfo(status(connectedBefore)),
		launch: running,
		agent:  &guestAgentInfo{connected: true, os: fedora, interfaces: []v1.VirtualMachineInstanceNetworkInterface{}},
		want:   v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{connectedBefore}, GuestOSInfo: fedora},
	}, {
		name:   "an agent without interface data keeps the interfaces",
		before: withInfo(status(connectedBefore)),
		launch: running,
		agent:  &guestAgentInfo{connected: true, os: fedora},
		want:   withInfo(status(connectedBefore)),
	}, {
		name:   "the guest shut down: AgentConnected goes",
		before: withInfo(status(connectedBefore)),
		launch: &client.Status{Defined: true, Started: true, State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown, Final: true},
		agent:  &guestAgentInfo{connected: true, os: fedora, interfaces: eth0},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "n", GuestOSInfo: fedora, Interfaces: eth0,
			PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: v1.Succeeded, PhaseTransitionTimestamp: ts}}},
	}, {
		name:   "not Running yet: no AgentConnected",
		before: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"},
		launch: &client.Status{Defined: true},
		agent:  &guestAgentInfo{connected: true, os: fedora},
		want:   v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{Status: tt.before}
			before := vmi.DeepCopy()
			got := calculateStatus(vmi, observation{now: now, launcher: tt.launch, agent: tt.agent})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, vmi); diff != "" {
				t.Errorf("calculateStatus modified the VMI:\n%s", diff)
			}
		})
	}
}

// TestIOErrorPauseThroughSync drives the agent's sync against a real
// launcher on the fake hypervisor: when QEMU pauses the running guest on an
// I/O error, the written VMI stays Running with Paused=True PausedIOError,
// and the agent's /metrics has vmkit_nodeagent_vmi_paused for it; once the
// guest is resumed both are gone.
func TestIOErrorPauseThroughSync(t *testing.T) {
	dir := agenttest.ShortTempDir(t)
	share := filepath.Join(dir, "share")
	vmi := orphanVMI("vm1", "0d4a0f4e-1111-4222-8333-944455557777")
	vmi.Labels = map[string]string{v1.NodeNameLabel: "node01"}
	vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01"}
	h := hvfake.New()
	agenttest.RunLauncher(t, dir, share, h, vmi)
	ctx := context.Background()
	vmClient := vmfake.NewSimpleClientset(vmi.DeepCopy())
	rec := record.NewFakeRecorder(100)
	a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(), ShareDir: share,
		KubeletPodsDir: filepath.Join(dir, "pods"), Recorder: rec, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ioEvents := func() (n int) {
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, "Warning IOerror") {
					n++
				}
			default:
				return n
			}
		}
	}
	syncUntil := func(what string, cond func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.informer.GetIndexer().Update(got); err != nil {
				t.Fatal(err)
			}
			if cond(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; status %+v", what, got.Status)
			}
			if _, err := a.sync(ctx, "ns/vm1"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pausedMetric := func() map[string]float64 { return agenttest.Samples(t, a.Registry(), "vmkit_nodeagent_vmi_paused") }

	waitFor(t, func() bool { _, err := a.client(vmi.UID).Ping(ctx); return err == nil })
	syncUntil("Running", func(v *v1.VirtualMachineInstance) bool { return v.Status.Phase == v1.Running })
	if got := pausedMetric(); len(got) != 0 {
		t.Errorf("vmkit_nodeagent_vmi_paused of a running guest: %v, want none", got)
	}

	if err := h.SetState("ns_vm1", hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonIOError}); err != nil {
		t.Fatal(err)
	}
	got := syncUntil("Paused", func(v *v1.VirtualMachineInstance) bool { return pausedConditionOf(&v.Status) != nil })
	if c := pausedConditionOf(&got.Status); got.Status.Phase != v1.Running || c.Status != corev1.ConditionTrue || c.Reason != ReasonPausedIOError {
		t.Errorf("after the I/O error: phase %s, Paused %+v; want Running, True %s", got.Status.Phase, c, ReasonPausedIOError)
	}
	if n := ioEvents(); n != 1 {
		t.Errorf("%d Warning IOerror events after the I/O error, want 1", n)
	}
	want := map[string]float64{`vmkit_nodeagent_vmi_paused{name="vm1",namespace="ns",node="node01",reason="PausedIOError"}`: 1}
	if diff := cmp.Diff(want, pausedMetric()); diff != "" {
		t.Errorf("vmkit_nodeagent_vmi_paused (-want +got):\n%s", diff)
	}

	if err := h.SetState("ns_vm1", hypervisor.DomainState{State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}); err != nil {
		t.Fatal(err)
	}
	syncUntil("Paused to go", func(v *v1.VirtualMachineInstance) bool { return pausedConditionOf(&v.Status) == nil })
	if got := pausedMetric(); len(got) != 0 {
		t.Errorf("vmkit_nodeagent_vmi_paused after the resume: %v, want none", got)
	}
}
