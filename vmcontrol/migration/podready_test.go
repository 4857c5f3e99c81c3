package migration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestTargetPodReadyWithReadinessProbe: a target pod whose compute
// container started counts as ready for the hand-off even while a VMI
// readiness probe (the compute container's) keeps the container unready:
// the guest, and so the probe's success, arrives only with the migration.
func TestTargetPodReadyWithReadinessProbe(t *testing.T) {
	p := target(corev1.PodRunning, false)
	if podReady(p) {
		t.Error("a target whose compute container has not started is ready")
	}
	p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
	if !podReady(p) {
		t.Error("a target whose compute container started, unready behind a readiness probe, is not ready for the hand-off")
	}
	p.Spec.NodeName = ""
	if podReady(p) {
		t.Error("a target on no node is ready")
	}
}
