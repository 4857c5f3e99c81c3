package nodeagent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestWithStartSteps(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	a := &Agent{wiredAt: map[types.UID]time.Time{"u": t0}}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	started := &client.Status{Timeline: &client.StartSteps{
		DisksPrepared: t0.Add(time.Second), DomainDefined: t0.Add(2 * time.Second), DomainStarted: t0.Add(3 * time.Second)}}

	got, changed := a.withStartSteps(vmi, started)
	if !changed || got == vmi || vmi.Annotations != nil {
		t.Fatalf("changed %v, copy %v, original annotations %v: want a changed copy", changed, got != vmi, vmi.Annotations)
	}
	steps, err := v1.ParseStartTimeline(got.Annotations[v1.StartStepsAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, s := range steps {
		phases = append(phases, s.Phase)
	}
	if len(steps) != 4 || steps[0].Phase != v1.StartPhaseNetworkWired || !steps[0].Time.Equal(&metav1.MicroTime{Time: t0}) ||
		steps[3].Phase != v1.StartPhaseGuestRunning || steps.Total() != 3*time.Second {
		t.Errorf("steps %v (%v), want networkWired … guestRunning over 3s", phases, steps)
	}
	// Once: not again, not before the domain started, not after the
	// timeline.
	if _, changed := a.withStartSteps(got, started); changed {
		t.Error("the steps were handed over twice")
	}
	if _, changed := a.withStartSteps(vmi, &client.Status{Timeline: &client.StartSteps{DisksPrepared: t0}}); changed {
		t.Error("steps handed over before the domain started")
	}
	done := vmi.DeepCopy()
	done.Annotations = map[string]string{v1.StartTimelineAnnotation: "[]"}
	if _, changed := a.withStartSteps(done, started); changed {
		t.Error("steps handed over to a VMI with a timeline")
	}
}
