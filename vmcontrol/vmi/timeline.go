package vmi

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// ReasonStartTimeline is the reason of the event that gives a started VMI's
// start timeline: each phase's duration and the total.
const ReasonStartTimeline = "StartTimeline"

// startTimeline is the VMI's start timeline (v1.StartTimelineAnnotation)
// once status makes it Ready for the first time: created, the launcher
// pod's scheduling and the start of its compute container (every image
// pulled, init containers done), the node agent's steps
// (v1.StartStepsAnnotation), the guest agent's connection when it came
// before, and now, Ready. Kubernetes keeps some of these times to the
// second; a phase that seems to end before the one it follows is given the
// latter's time, so no phase takes less than nothing. nil unless status
// makes the VMI Ready for the first time.
func startTimeline(vmi *v1.VirtualMachineInstance, pod *corev1.Pod, status *v1.VirtualMachineInstanceStatus, now time.Time) v1.StartTimeline {
	if _, done := vmi.Annotations[v1.StartTimelineAnnotation]; done || isReady(&vmi.Status) || !isReady(status) || status.MigrationState != nil {
		return nil // a timeline, Ready already (a VMI from before timelines), not Ready yet, or migrated
	}
	var t v1.StartTimeline
	add := func(phase string, at time.Time) {
		if at.IsZero() {
			return
		}
		if n := len(t); n > 0 && at.Before(t[n-1].Time.Time) {
			at = t[n-1].Time.Time
		}
		t = append(t, v1.StartPhase{Phase: phase, Time: metav1.NewMicroTime(at.UTC())})
	}
	add(v1.StartPhaseCreated, vmi.CreationTimestamp.Time)
	if pod != nil {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				add(v1.StartPhasePodScheduled, c.LastTransitionTime.Time)
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == ComputeContainer && cs.State.Running != nil {
				add(v1.StartPhaseImagesPulled, cs.State.Running.StartedAt.Time)
			}
		}
	}
	if s, ok := vmi.Annotations[v1.StartStepsAnnotation]; ok {
		if steps, err := v1.ParseStartTimeline(s); err == nil {
			for _, p := range steps {
				add(p.Phase, p.Time.Time)
			}
		}
	}
	for _, c := range status.Conditions {
		if c.Type == v1.VirtualMachineInstanceAgentConnected && c.Status == corev1.ConditionTrue {
			add(v1.StartPhaseAgentConnected, c.LastTransitionTime.Time)
		}
	}
	add(v1.StartPhaseReady, now)
	return t
}

func isReady(status *v1.VirtualMachineInstanceStatus) bool {
	for _, c := range status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// recordStartTimeline puts the timeline on the VMI (the annotation, for the
// Update that writes its status), and drops the node agent's hand-over.
func recordStartTimeline(vmi *v1.VirtualMachineInstance, t v1.StartTimeline) {
	b, err := json.Marshal(t)
	if err != nil {
		return // a list of names and times always marshals
	}
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	vmi.Annotations[v1.StartTimelineAnnotation] = string(b)
	delete(vmi.Annotations, v1.StartStepsAnnotation)
}
