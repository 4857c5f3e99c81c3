package vmi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestReadinessProbeDrivesReady: with a readiness probe the compute
// container is not ready until the guest passes it, yet the VMI is handed
// to the node agent (Scheduled) once the container started; once the guest
// runs, the VMI's Ready condition is the pod's, reason and message
// included, as KubeVirt's.
func TestReadinessProbeDrivesReady(t *testing.T) {
	notReady := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
		Message: "containers with unready status: [compute]"}
	started := func(vmi *v1.VirtualMachineInstance, ready bool) *corev1.Pod {
		p := launcherPod(vmi, corev1.PodRunning, ready, "node01")
		p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Minute))}
		c := notReady
		if ready {
			c = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
		}
		p.Status.Conditions = append(p.Status.Conditions, c)
		return p
	}
	sync := func(vmi *v1.VirtualMachineInstance, pod *corev1.Pod) *v1.VirtualMachineInstance {
		t.Helper()
		h := newHarness(t, fakeRenderer{}, vmi.DeepCopy(), pod)
		if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
			t.Fatal(err)
		}
		return h.vmi(t)
	}
	ready := func(vmi *v1.VirtualMachineInstance) v1.VirtualMachineInstanceCondition {
		for _, c := range vmi.Status.Conditions {
			if c.Type == v1.VirtualMachineInstanceReady {
				c.LastProbeTime, c.LastTransitionTime = metav1.Time{}, metav1.Time{}
				return c
			}
		}
		return v1.VirtualMachineInstanceCondition{}
	}

	scheduling := newVMI(v1.Scheduling)
	got := sync(scheduling, started(scheduling, false))
	if got.Status.Phase != v1.Scheduled || got.Status.NodeName != "node01" {
		t.Errorf("compute started, not ready: phase %s node %q; want Scheduled on node01", got.Status.Phase, got.Status.NodeName)
	}
	if c := ready(got); c.Status != corev1.ConditionFalse || c.Reason != "GuestNotRunning" {
		t.Errorf("Ready before the guest runs = %+v, want False GuestNotRunning", c)
	}

	running := newVMI(v1.Running)
	running.Status.NodeName = "node01"
	want := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse,
		Reason: "ContainersNotReady", Message: "containers with unready status: [compute]"}
	if diff := cmp.Diff(want, ready(sync(running, started(running, false)))); diff != "" {
		t.Errorf("Ready while the probe fails (-want +got):\n%s", diff)
	}
	want = v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}
	if diff := cmp.Diff(want, ready(sync(running, started(running, true)))); diff != "" {
		t.Errorf("Ready once the probe passes (-want +got):\n%s", diff)
	}
}
