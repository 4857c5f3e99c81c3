package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestStartTimeline (#40 item 3): a started VMI carries its start timeline
// (vmkit.io/start-timeline): every phase from created to ready, in order,
// adding up to the create → Ready time the test measures within 10 % (and
// the second to which Kubernetes keeps creationTimestamp), and one event
// with the durations.
func TestStartTimeline(t *testing.T) {
	c := suite.Need(t)
	// On the pod network, so every phase is there (the tiny VM has no NIC).
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-timeline", v1.RunStrategyAlways)
	began := time.Now()
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Ready", func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceReady)
		return cond != nil && cond.Status == corev1.ConditionTrue
	})
	measured := time.Since(began)
	timeline, err := v1.ParseStartTimeline(vmi.Annotations[v1.StartTimelineAnnotation])
	if err != nil || len(timeline) == 0 {
		t.Fatalf("Ready VMI without a start timeline: %v (annotations %v)", err, vmi.Annotations)
	}
	t.Logf("create → Ready %v as the test saw it; timeline: %s", measured.Round(time.Millisecond), timeline)
	var phases []string
	for i, p := range timeline {
		phases = append(phases, p.Phase)
		if timeline.Duration(i) < 0 {
			t.Errorf("phase %s ends before the one it follows", p.Phase)
		}
	}
	for _, want := range []string{v1.StartPhaseCreated, v1.StartPhasePodScheduled, v1.StartPhaseImagesPulled, v1.StartPhaseNetworkWired,
		v1.StartPhaseDisksPrepared, v1.StartPhaseDomainDefined, v1.StartPhaseGuestRunning, v1.StartPhaseReady} {
		if !slices.Contains(phases, want) {
			t.Errorf("timeline %v lacks phase %s", phases, want)
		}
	}
	if phases[0] != v1.StartPhaseCreated || phases[len(phases)-1] != v1.StartPhaseReady {
		t.Errorf("timeline %v does not run from created to ready", phases)
	}
	if _, ok := vmi.Annotations[v1.StartStepsAnnotation]; ok {
		t.Errorf("the node agent's hand-over %s is still on the VMI", v1.StartStepsAnnotation)
	}
	if diff := (timeline.Total() - measured).Abs(); diff > measured/10+time.Second {
		t.Errorf("the timeline adds up to %v, the test measured %v from create to Ready: more than 10%% (+1s) apart", timeline.Total(), measured)
	}
	if msg := waitEvent(t, c, vmi.UID, corev1.EventTypeNormal, "StartTimeline").Message; !strings.HasPrefix(msg, "Started in podScheduled ") || !strings.Contains(msg, " in all") {
		t.Errorf("StartTimeline event %q, want the durations from podScheduled and the total", msg)
	}
}
