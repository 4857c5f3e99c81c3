package vmi

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestStartTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := `[{"phase":"networkWired","time":"2026-11-28T10:00:03.100000Z"},{"phase":"disksPrepared","time":"2026-11-28T10:00:03.400000Z"},` +
		`{"phase":"domainDefined","time":"2026-11-28T10:00:03.500000Z"},{"phase":"guestRunning","time":"2026-11-28T10:00:03.900000Z"}]`
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0),
		Annotations: map[string]string{v1.StartStepsAnnotation: steps}}}
	vmi.Status.Phase = v1.Running
	pod := &corev1.Pod{Status: corev1.PodStatus{
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(time.Second))}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: ComputeContainer, State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at(3 * time.Second))}}}},
	}}
	ready := &v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: []v1.VirtualMachineInstanceCondition{
		// Kept to the second by Kubernetes: 10:00:03, before guestRunning.
		{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(3 * time.Second))},
		{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue},
	}}
	got := startTimeline(vmi, pod, ready, at(4500*time.Millisecond))
	type p struct {
		Phase string
		At    time.Duration
	}
	var phases []p
	for _, s := range got {
		phases = append(phases, p{s.Phase, s.Time.Sub(t0)})
	}
	want := []p{
		{v1.StartPhaseCreated, 0}, {v1.StartPhasePodScheduled, time.Second}, {v1.StartPhaseImagesPulled, 3 * time.Second},
		{v1.StartPhaseNetworkWired, 3100 * time.Millisecond}, {v1.StartPhaseDisksPrepared, 3400 * time.Millisecond},
		{v1.StartPhaseDomainDefined, 3500 * time.Millisecond}, {v1.StartPhaseGuestRunning, 3900 * time.Millisecond},
		{v1.StartPhaseAgentConnected, 3900 * time.Millisecond}, // raised to the phase before
		{v1.StartPhaseReady, 4500 * time.Millisecond},
	}
	if diff := cmp.Diff(want, phases); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if got.Total() != 4500*time.Millisecond {
		t.Errorf("Total = %v, want 4.5s", got.Total())
	}
	const wantString = "podScheduled 1.0s, imagesPulled 2.0s, networkWired 0.1s, disksPrepared 0.3s, domainDefined 0.1s, guestRunning 0.4s, agentConnected 0.0s, ready 0.6s: 4.5s in all"
	if s := got.String(); s != wantString {
		t.Errorf("String = %q, want %q", s, wantString)
	}

	// Once only: not for a VMI that was Ready, has a timeline, or is not
	// Ready yet.
	wasReady := vmi.DeepCopy()
	wasReady.Status = *ready
	notReady := &v1.VirtualMachineInstanceStatus{Phase: v1.Running}
	withTimeline := vmi.DeepCopy()
	recordStartTimeline(withTimeline, got)
	if _, ok := withTimeline.Annotations[v1.StartStepsAnnotation]; ok {
		t.Error("recordStartTimeline kept the node agent's hand-over")
	}
	parsed, err := v1.ParseStartTimeline(withTimeline.Annotations[v1.StartTimelineAnnotation])
	if err != nil || parsed.Total() != got.Total() {
		t.Errorf("the annotation reads back as %v, %v", parsed, err)
	}
	for name, tc := range map[string]struct {
		vmi    *v1.VirtualMachineInstance
		status *v1.VirtualMachineInstanceStatus
	}{"was Ready": {wasReady, ready}, "has a timeline": {withTimeline, ready}, "not Ready": {vmi, notReady}} {
		if tl := startTimeline(tc.vmi, pod, tc.status, at(5*time.Second)); tl != nil {
			t.Errorf("%s: timeline %v, want none", name, tl)
		}
	}
}
