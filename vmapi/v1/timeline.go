package v1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StartTimelineAnnotation is vmkit's, not KubeVirt's (whose API has no
// field for it): when each phase of a VMI's start ended, as a JSON
// StartTimeline. The node agent writes it once, when the VMI is first
// Ready; phaseTransitionTimestamps stays KubeVirt's.
const StartTimelineAnnotation = "vmkit.io/start-timeline"

// StartStepsAnnotation is how the node agent hands the VMI controller its
// steps of a start (networkWired, disksPrepared, domainDefined,
// guestRunning), as a JSON StartTimeline; the controller folds them into
// StartTimelineAnnotation when the VMI becomes Ready.
const StartStepsAnnotation = "vmkit.io/start-steps"

// The phases of a start, in the order they end on vmkit.
const (
	StartPhaseCreated        = "created"        // the VMI was created
	StartPhasePodScheduled   = "podScheduled"   // the scheduler placed the launcher pod
	StartPhaseImagesPulled   = "imagesPulled"   // the compute container started: every image pulled, init containers done
	StartPhaseNetworkWired   = "networkWired"   // the node agent wired the pod network
	StartPhaseDisksPrepared  = "disksPrepared"  // the launcher prepared the disks
	StartPhaseDomainDefined  = "domainDefined"  // libvirt defined the domain
	StartPhaseGuestRunning   = "guestRunning"   // QEMU runs the guest
	StartPhaseAgentConnected = "agentConnected" // the guest agent answered
	StartPhaseReady          = "ready"          // the VMI became Ready
)

// StartTimeline is when each phase of a start ended, in the order they
// ended; a phase vmkit did not see (no guest agent, a node agent restarted
// meanwhile) is left out.
//
// +k8s:deepcopy-gen=false
type StartTimeline []StartPhase

// StartPhase is one phase of a start and when it ended.
//
// +k8s:deepcopy-gen=false
type StartPhase struct {
	Phase string           `json:"phase"`
	Time  metav1.MicroTime `json:"time"`
}

// ParseStartTimeline reads a StartTimelineAnnotation's value.
func ParseStartTimeline(s string) (StartTimeline, error) {
	var t StartTimeline
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", StartTimelineAnnotation, err)
	}
	return t, nil
}

// Duration is how long phase i took: from the end of the phase before it.
// The first phase took no time.
func (t StartTimeline) Duration(i int) time.Duration {
	if i <= 0 || i >= len(t) {
		return 0
	}
	return t[i].Time.Sub(t[i-1].Time.Time)
}

// Total is the time from the first phase's end to the last's.
func (t StartTimeline) Total() time.Duration {
	if len(t) < 2 {
		return 0
	}
	return t[len(t)-1].Time.Sub(t[0].Time.Time)
}

// String is the phases with their durations and the total, e.g.
// "podScheduled 0.1s, imagesPulled 2.3s, …, ready 0.2s: 9.8s in all".
func (t StartTimeline) String() string {
	var b strings.Builder
	for i := 1; i < len(t); i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1fs", t[i].Phase, t.Duration(i).Seconds())
	}
	fmt.Fprintf(&b, ": %.1fs in all", t.Total().Seconds())
	return b.String()
}
