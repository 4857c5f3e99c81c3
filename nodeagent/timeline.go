package nodeagent

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// withStartSteps returns vmi with the node's steps of its start in
// v1.StartStepsAnnotation, for the VMI controller's start timeline, once
// the launcher started the domain: when the agent wired the pod network
// (unknown after an agent restart, and for a VMI without one) and the
// launcher's steps. A copy, and true, when it adds them; vmi, and false,
// when they or the timeline are there already or the domain has not
// started.
func (a *Agent) withStartSteps(vmi *v1.VirtualMachineInstance, st *client.Status) (*v1.VirtualMachineInstance, bool) {
	if st == nil || st.Timeline == nil || st.Timeline.DomainStarted.IsZero() {
		return vmi, false
	}
	if _, ok := vmi.Annotations[v1.StartTimelineAnnotation]; ok {
		return vmi, false
	}
	if _, ok := vmi.Annotations[v1.StartStepsAnnotation]; ok {
		return vmi, false
	}
	a.mu.Lock()
	wired := a.wiredAt[vmi.UID]
	a.mu.Unlock()
	var steps v1.StartTimeline
	for _, s := range []struct {
		phase string
		at    time.Time
	}{
		{v1.StartPhaseNetworkWired, wired},
		{v1.StartPhaseDisksPrepared, st.Timeline.DisksPrepared},
		{v1.StartPhaseDomainDefined, st.Timeline.DomainDefined},
		{v1.StartPhaseGuestRunning, st.Timeline.DomainStarted},
	} {
		if !s.at.IsZero() {
			steps = append(steps, v1.StartPhase{Phase: s.phase, Time: metav1.NewMicroTime(s.at.UTC())})
		}
	}
	b, err := json.Marshal(steps)
	if err != nil {
		return vmi, false
	}
	vmi = vmi.DeepCopy()
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	vmi.Annotations[v1.StartStepsAnnotation] = string(b)
	return vmi, true
}
