package nodeagent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestAccessCredentialsCondition: the launcher's report of its guest-agent
// access credentials becomes the AccessCredentialsSynchronized condition of
// a Running VMI, with KubeVirt's reasons and the failure as message; no
// report, no condition.
func TestAccessCredentialsCondition(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := metav1.NewTime(now)
	running := func(ac *client.AccessCredentialsStatus) observation {
		return observation{now: now, launcher: &client.Status{Defined: true, Started: true, State: hypervisor.StateRunning,
			Reason: hypervisor.ReasonUnpaused, AccessCredentials: ac}}
	}
	failed := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceAccessCredentialsSynchronized, Status: corev1.ConditionFalse,
		Reason: ReasonAccessCredentialsSyncFailed, Message: "Guest agent is offline", LastTransitionTime: ts}
	synced := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceAccessCredentialsSynchronized, Status: corev1.ConditionTrue,
		Reason: ReasonAccessCredentialsSyncSuccess, LastTransitionTime: ts}
	for _, tc := range []struct {
		name string
		in   []v1.VirtualMachineInstanceCondition
		obs  observation
		want []v1.VirtualMachineInstanceCondition
	}{
		{"no report", nil, running(nil), nil},
		{"failed", nil, running(&client.AccessCredentialsStatus{Message: "Guest agent is offline"}), []v1.VirtualMachineInstanceCondition{failed}},
		{"synchronized after a failure", []v1.VirtualMachineInstanceCondition{failed}, running(&client.AccessCredentialsStatus{Succeeded: true}),
			[]v1.VirtualMachineInstanceCondition{synced}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: tc.in}}
			got := calculateStatus(vmi, tc.obs)
			if d := cmp.Diff(tc.want, got.Conditions); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
		})
	}
}

// TestAccessCredentialsEvents: KubeVirt's events when the condition
// changes, none while it stays.
func TestAccessCredentialsEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	a := &Agent{recorder: rec}
	cond := func(s corev1.ConditionStatus, msg string) []v1.VirtualMachineInstanceCondition {
		return []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceAccessCredentialsSynchronized, Status: s, Message: msg}}
	}
	vmi := &v1.VirtualMachineInstance{}
	steps := []struct {
		next []v1.VirtualMachineInstanceCondition
		want string // "" for no event
	}{
		{nil, ""},
		{cond(corev1.ConditionFalse, "Guest agent is offline"), "Warning AccessCredentialsSyncFailed Access credentials sync failed: Guest agent is offline"},
		{cond(corev1.ConditionFalse, "Guest agent is offline"), ""},
		{cond(corev1.ConditionTrue, ""), "Normal AccessCredentialsSyncSuccess Access credentials sync successful."},
		{cond(corev1.ConditionTrue, ""), ""},
	}
	for i, s := range steps {
		status := v1.VirtualMachineInstanceStatus{Conditions: s.next}
		a.accessCredentialsEvent(vmi, &status)
		got := ""
		select {
		case got = <-rec.Events:
		default:
		}
		if got != s.want {
			t.Errorf("step %d: event %q, want %q", i, got, s.want)
		}
		vmi.Status = status
	}
}
