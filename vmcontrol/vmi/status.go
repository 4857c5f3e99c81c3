package vmi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

// ComputeContainer is the name of the launcher pod's container running the guest.
const ComputeContainer = "compute"

// calculateStatus is the VMI's status given its pods and what the sync did.
// It is pure; sync writes the result only when it differs.
func calculateStatus(vmi *v1.VirtualMachineInstance, obs observation) v1.VirtualMachineInstanceStatus {
	s := *vmi.Status.DeepCopy()
	now := metav1.NewTime(obs.now.Truncate(1e9))
	enter := func(p v1.VirtualMachineInstancePhase) {
		if s.Phase == p {
			return
		}
		s.Phase = p
		s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
	}

	pod := obs.pod
	switch {
	case vmi.IsFinal():
		// Final phases never change; only the pod bookkeeping below does.
	case obs.podGone:
		enter(v1.Failed)
		s.Reason = ReasonPodDeleted
	case pod == nil:
		if s.Phase == v1.VmPhaseUnset {
			enter(v1.Pending)
		}
	case pod.Status.Phase == corev1.PodFailed || (pod.Status.Phase == corev1.PodSucceeded && s.Phase != v1.Running):
		enter(v1.Failed)
		s.Reason = ReasonPodFailed
	default:
		if s.Phase == v1.VmPhaseUnset {
			enter(v1.Pending)
		}
		if s.Phase == v1.Pending {
			enter(v1.Scheduling)
		}
		if s.Phase == v1.Scheduling && computeStarted(pod) && pod.Spec.NodeName != "" {
			enter(v1.Scheduled)
			s.NodeName = pod.Spec.NodeName
		}
	}
	if pod != nil && pod.Status.QOSClass != "" {
		q := pod.Status.QOSClass
		s.QOSClass = &q
	}
	s.ActivePods = activePods(obs.pods)
	// From the hand-over on, as KubeVirt: the node's launcher reads the
	// claims' sizes from it.
	if pod != nil && !vmi.IsFinal() && (s.Phase == v1.Scheduled || s.Phase == v1.Running) {
		s.VolumeStatus = volumeStatus(vmi.Spec.Volumes, s.VolumeStatus, obs.claims)
	}

	// The LiveMigratable condition goes with the write that hands the VMI
	// over, rather than in a write of its own from the migration
	// controller, which keeps it from then on (the same computation).
	if obs.claimLookup != nil && pod != nil && !vmi.IsFinal() && vmi.DeletionTimestamp == nil && (s.Phase == v1.Scheduled || s.Phase == v1.Running) {
		setMigratable(&s, vmi, obs.claimLookup, now)
	}

	if s.Memory == nil && pod != nil && !vmi.IsFinal() {
		s.Memory = initialMemoryStatus(vmi)
	}
	if hp := obs.memory; hp != nil && hp.requested != nil && s.Memory != nil {
		s.Memory.GuestRequested = hp.requested
	}
	if c := memoryChangeCondition(vmi, &s, obs.memory); c != nil {
		setCondition(&s, c, now)
	} else {
		removeCondition(&s, v1.VirtualMachineInstanceMemoryChange)
	}
	if c := podScheduledCondition(pod); c != nil {
		setCondition(&s, c, now)
	} else {
		removeCondition(&s, v1.VirtualMachineInstancePodScheduled)
	}
	setCondition(&s, readyCondition(&s, pod), now)
	if obs.syncErr != nil {
		setCondition(&s, &v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
			Reason: obs.syncErr.reason, Message: obs.syncErr.err.Error()}, now)
	} else {
		removeCondition(&s, v1.VirtualMachineInstanceSynchronized)
	}
	return s
}

// activePods maps the UID of each running launcher pod to its node. Pods
// still pending are left out, so binding a pod to a node costs no VMI write.
func activePods(pods []*corev1.Pod) map[types.UID]string {
	m := map[types.UID]string{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			m[p.UID] = p.Spec.NodeName
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// computeStarted reports whether the launcher pod runs and its compute
// container has started, which is when the node agent can take the VMI
// over (KubeVirt's isPodReady). It does not wait for the container to be
// ready: a VMI's readiness probe is the compute container's, and it can
// pass only once the node agent started the guest.
func computeStarted(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == ComputeContainer {
			return cs.Ready || cs.State.Running != nil
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podScheduledCondition mirrors the pod's PodScheduled condition while the
// pod cannot be scheduled (so users see why); once scheduled it is dropped,
// which saves a status write per VMI.
func podScheduledCondition(pod *corev1.Pod) *v1.VirtualMachineInstanceCondition {
	if pod == nil {
		return nil
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return &v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePodScheduled, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return nil
}

// readyCondition: the VMI is ready when its guest runs and its pod is
// ready, which with a readiness probe means the probe passes (the probe is
// the compute container's). As KubeVirt's, once the guest runs the
// condition is the pod's Ready condition (status, reason and message, e.g.
// ContainersNotReady "containers with unready status: [compute]"). Until
// the guest runs the reason stays GuestNotRunning, so pod progress does not
// rewrite the VMI (or, through the mirrored condition, its VM).
func readyCondition(s *v1.VirtualMachineInstanceStatus, pod *corev1.Pod) *v1.VirtualMachineInstanceCondition {
	c := &v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse}
	switch {
	case s.Phase != v1.Running:
		c.Reason, c.Message = "GuestNotRunning", "the guest is not running"
		return c
	case pod == nil:
		c.Reason, c.Message = "PodNotExists", "virt-launcher pod does not exist"
		return c
	case pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		c.Reason, c.Message = "PodTerminating", "virt-launcher pod is terminating"
		return c
	}
	for _, pc := range pod.Status.Conditions {
		if pc.Type == corev1.PodReady {
			c.Status, c.Reason, c.Message = pc.Status, pc.Reason, pc.Message
			return c
		}
	}
	// A pod without the condition (a fake, or a kubelet that has not
	// reported it yet): its compute container says.
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == ComputeContainer && cs.Ready && pod.Status.Phase == corev1.PodRunning {
			c.Status = corev1.ConditionTrue
			return c
		}
	}
	c.Reason, c.Message = "PodConditionMissing", "virt-launcher pod is missing the Ready condition"
	return c
}

// setMigratable sets the LiveMigratable condition and migration method
// as migration.LiveMigratable computes them, keeping the condition as it
// is while its status, reason and message stay the same.
func setMigratable(s *v1.VirtualMachineInstanceStatus, vmi *v1.VirtualMachineInstance, claims migration.ClaimLookup, now metav1.Time) {
	cond, method := migration.LiveMigratable(vmi, claims)
	s.MigrationMethod = method
	for i := range s.Conditions {
		if old := &s.Conditions[i]; old.Type == cond.Type && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			return
		}
	}
	setCondition(s, &cond, now)
	for i := range s.Conditions {
		if s.Conditions[i].Type == cond.Type {
			s.Conditions[i].LastProbeTime = now
		}
	}
}

// setCondition replaces or adds c (nil removes nothing), keeping the
// transition time when the status did not change.
func setCondition(s *v1.VirtualMachineInstanceStatus, c *v1.VirtualMachineInstanceCondition, now metav1.Time) {
	if c == nil {
		return
	}
	for i := range s.Conditions {
		old := &s.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		c.LastProbeTime = old.LastProbeTime
		*old = *c
		return
	}
	c.LastTransitionTime = now
	s.Conditions = append(s.Conditions, *c)
}

func removeCondition(s *v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType) {
	out := s.Conditions[:0]
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
}
