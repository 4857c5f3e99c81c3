package nodeagent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestCalculateStatus(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := metav1.NewTime(now)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	vmiIn := func(p v1.VirtualMachineInstancePhase, conds ...v1.VirtualMachineInstanceCondition) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: p, NodeName: "n", Conditions: conds}}
	}
	live := func(st hypervisor.State, r hypervisor.Reason) *launcher.Status {
		return &launcher.Status{Defined: true, Started: true, State: st, Reason: r}
	}
	final := func(st hypervisor.State, r hypervisor.Reason, requested bool) *launcher.Status {
		return &launcher.Status{Defined: true, Started: true, State: st, Reason: r, Final: true, StopRequested: requested}
	}
	paused := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue,
		Reason: ReasonPausedByUser, Message: "VMI was paused by user", LastTransitionTime: ts}
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
		obs:  observation{launcher: &launcher.Status{Defined: true, State: hypervisor.StateShutoff}},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"},
	}, {
		name: "paused by the user sets Paused and keeps Ready alone",
		vmi:  vmiIn(v1.Running, ready),
		obs:  observation{launcher: live(hypervisor.StatePaused, hypervisor.ReasonUser)},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Conditions: []v1.VirtualMachineInstanceCondition{ready, paused}},
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
		obs: observation{launcher: &launcher.Status{Defined: true, Started: true, State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown,
			Final: true, StopRequested: true, Terminated: true}},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Reason: ReasonLauncherTerminated, NodeName: "n", PhaseTransitionTimestamps: enter(v1.Failed)},
	}, {
		name: "launcher terminated while the VMI is deleted: Succeeded",
		vmi: func() *v1.VirtualMachineInstance {
			vmi := vmiIn(v1.Running)
			vmi.DeletionTimestamp = &ts
			return vmi
		}(),
		obs: observation{launcher: &launcher.Status{Defined: true, Started: true, State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown,
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

func TestCalculateStatusGuestAgent(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := metav1.NewTime(now)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	running := &launcher.Status{Defined: true, Started: true, State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused}
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
		launch *launcher.Status
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
		launch: &launcher.Status{Defined: true, Started: true, State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown, Final: true},
		agent:  &guestAgentInfo{connected: true, os: fedora, interfaces: eth0},
		want: v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "n", GuestOSInfo: fedora, Interfaces: eth0,
			PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: v1.Succeeded, PhaseTransitionTimestamp: ts}}},
	}, {
		name:   "not Running yet: no AgentConnected",
		before: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"},
		launch: &launcher.Status{Defined: true},
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
