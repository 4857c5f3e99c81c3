package vm

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Condition reasons the controller sets on VMs.
const (
	ReasonVMINotExists   = "VMINotExists"
	ReasonVMIForeign     = "VMIOwnedByAnother"
	ReasonInvalidSpec    = "InvalidRunStrategy"
	ReasonFailedCreate   = "FailedCreate"
	ReasonFailedDelete   = "FailedDelete"
	ReasonCrashLoop      = "CrashLoopBackOff"
	reasonPodUnscheduled = "Unschedulable"
	// reasonFailedPvcNotFound is the VMI controller's Synchronized=False
	// reason for a claim that does not exist (vmi.ReasonFailedPvcNotFound).
	reasonFailedPvcNotFound = "FailedPvcNotFound"
)

// calculateStatus is the VM's status given its instance (nil when none, or
// when it belongs to someone else) and what the sync learned. It is pure:
// sync writes the result only when it differs from the stored status.
func calculateStatus(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, st state) v1.VirtualMachineStatus {
	old := vm.Status
	s := v1.VirtualMachineStatus{
		Created:             vmi != nil,
		Ready:               vmi != nil && vmi.DeletionTimestamp == nil && isTrue(vmiCondition(vmi, v1.VirtualMachineInstanceReady)),
		StateChangeRequests: st.requests,
		StartFailure:        st.startFailure,
		RunStrategy:         st.strategy,
		DesiredGeneration:   vm.Generation,
		ObservedGeneration:  vm.Generation,
		InstancetypeRef:     st.expansion.InstancetypeRef,
		PreferenceRef:       st.expansion.PreferenceRef,
		// Written by virt-api, moved on here (memorydump.go).
		MemoryDumpRequest: memoryDumpRequest(vm, vmi),
		// Written by virt-api without the DeclarativeHotplugVolumes
		// behaviour (KubeVirt's older HotplugVolumes gate); vmkit's
		// virt-api changes the template instead: kept as written.
		VolumeRequests: old.VolumeRequests,
		// Written by the snapshot controller (vmcontrol/snapshot); the
		// volumes' snapshot statuses are its computation, written here too.
		SnapshotInProgress:     old.SnapshotInProgress,
		RestoreInProgress:      old.RestoreInProgress,
		VolumeSnapshotStatuses: old.VolumeSnapshotStatuses,
	}
	if st.snapshotStatuses != nil {
		s.VolumeSnapshotStatuses = st.snapshotStatuses
	}
	if st.strategyErr != nil {
		s.RunStrategy = ""
	}
	if vmi != nil {
		if g, err := strconv.ParseInt(vmi.Annotations[GenerationAnnotation], 10, 64); err == nil {
			s.ObservedGeneration = g
		}
	}
	s.PrintableStatus = printableStatus(vm, vmi, st)

	var conds []v1.VirtualMachineCondition
	conds = append(conds, readyCondition(vmi))
	// As KubeVirt, the instance's other conditions are the VM's too
	// (Synchronized with its FailedPvcNotFound or ErrImagePull, PodScheduled,
	// Paused, AgentConnected, ...); Ready is mirrored above, and Failure
	// and RestartRequired are the VM's own.
	if vmi != nil {
		for _, c := range vmi.Status.Conditions {
			switch v1.VirtualMachineConditionType(c.Type) {
			case v1.VirtualMachineReady, v1.VirtualMachineFailure, v1.VirtualMachineRestartRequired:
				continue
			}
			conds = append(conds, v1.VirtualMachineCondition{Type: v1.VirtualMachineConditionType(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	if c, ok := failureCondition(st); ok {
		conds = append(conds, c)
	}
	if st.restartRequired {
		conds = append(conds, v1.VirtualMachineCondition{Type: v1.VirtualMachineRestartRequired, Status: corev1.ConditionTrue, Message: RestartRequiredMessage})
	}
	// Keep the transition time of conditions whose status did not change.
	for i := range conds {
		conds[i].LastTransitionTime = metav1.NewTime(st.now.Truncate(1e9))
		for _, o := range old.Conditions {
			if o.Type == conds[i].Type && o.Status == conds[i].Status {
				conds[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	s.Conditions = conds
	return s
}

// readyCondition mirrors the instance's Ready condition once its guest runs;
// before that the reason stays the same, so the instance's progress does not
// rewrite the VM's status.
func readyCondition(vmi *v1.VirtualMachineInstance) v1.VirtualMachineCondition {
	c := vmiCondition(vmi, v1.VirtualMachineInstanceReady)
	switch {
	case vmi == nil:
		return v1.VirtualMachineCondition{Type: v1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: ReasonVMINotExists, Message: "VMI does not exist"}
	case vmi.Status.Phase != v1.Running || c == nil:
		return v1.VirtualMachineCondition{Type: v1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: "VMINotRunning", Message: "VMI is not running"}
	default:
		return v1.VirtualMachineCondition{Type: v1.VirtualMachineReady, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
}

func failureCondition(st state) (v1.VirtualMachineCondition, bool) {
	fail := func(reason, msg string) (v1.VirtualMachineCondition, bool) {
		return v1.VirtualMachineCondition{Type: v1.VirtualMachineFailure, Status: corev1.ConditionTrue, Reason: reason, Message: msg}, true
	}
	switch {
	case st.strategyErr != nil:
		return fail(ReasonInvalidSpec, st.strategyErr.Error())
	case st.foreignVMI:
		return fail(ReasonVMIForeign, "a VirtualMachineInstance with this name exists and is controlled by another object")
	case st.expansion.err != nil:
		return fail(st.expansion.reason, st.expansion.err.Error())
	case st.actErr != nil:
		return fail(st.actReason, st.actErr.Error())
	case st.dataVolumes.err != nil:
		return fail(st.dataVolumes.reason, st.dataVolumes.err.Error())
	}
	return v1.VirtualMachineCondition{}, false
}

// printableStatus is the one word kubectl get vm shows.
func printableStatus(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, st state) v1.VirtualMachinePrintableStatus {
	crashLooping := st.backoffRemaining() > 0
	switch {
	case vm.DeletionTimestamp != nil:
		return v1.VirtualMachineStatusTerminating
	case vmi == nil:
		if len(st.dataVolumes.failed) > 0 {
			return v1.VirtualMachineStatusDataVolumeError
		}
		if st.dataVolumes.waiting && wantsRunning(st) {
			return v1.VirtualMachineStatusProvisioning
		}
		if st.unboundClaim && wantsRunning(st) {
			return v1.VirtualMachineStatusWaitingForVolumeBinding
		}
		if crashLooping {
			return v1.VirtualMachineStatusCrashLoopBackOff
		}
		if wantsRunning(st) {
			return v1.VirtualMachineStatusStarting
		}
		return v1.VirtualMachineStatusStopped
	case vmi.DeletionTimestamp != nil:
		return v1.VirtualMachineStatusStopping
	}
	switch vmi.Status.Phase {
	case v1.VmPhaseUnset, v1.Pending, v1.Scheduling, v1.Scheduled:
		// KubeVirt's order: volume binding, image pulls, missing
		// claims, scheduling.
		if st.unboundClaim {
			return v1.VirtualMachineStatusWaitingForVolumeBinding
		}
		if c := vmiCondition(vmi, v1.VirtualMachineInstanceSynchronized); c != nil && c.Status == corev1.ConditionFalse {
			switch c.Reason {
			case string(v1.VirtualMachineStatusErrImagePull), string(v1.VirtualMachineStatusImagePullBackOff):
				return v1.VirtualMachinePrintableStatus(c.Reason)
			case reasonFailedPvcNotFound:
				return v1.VirtualMachineStatusPvcNotFound
			}
		}
		if c := vmiCondition(vmi, v1.VirtualMachineInstancePodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == reasonPodUnscheduled {
			return v1.VirtualMachineStatusUnschedulable
		}
		return v1.VirtualMachineStatusStarting
	case v1.Running:
		if isTrue(vmiCondition(vmi, v1.VirtualMachineInstancePaused)) {
			return v1.VirtualMachineStatusPaused
		}
		if m := vmi.Status.MigrationState; m != nil && m.StartTimestamp != nil && !m.Completed && !m.Failed {
			return v1.VirtualMachineStatusMigrating
		}
		return v1.VirtualMachineStatusRunning
	case v1.Succeeded, v1.Failed:
		if crashLooping {
			return v1.VirtualMachineStatusCrashLoopBackOff
		}
		return v1.VirtualMachineStatusStopped
	}
	return v1.VirtualMachineStatusUnknown
}

// wantsRunning reports whether the VM should have an instance now.
func wantsRunning(st state) bool {
	if len(st.requests) > 0 {
		return st.requests[0].Action == v1.StartRequest
	}
	switch st.strategy {
	case v1.RunStrategyAlways, v1.RunStrategyOnce:
		return true
	case v1.RunStrategyRerunOnFailure:
		// A stopped RerunOnFailure VM stays stopped (see decide); it
		// starts when it comes from another strategy.
		return st.prevStrategy != v1.RunStrategyRerunOnFailure
	}
	return false
}

func vmiCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstanceCondition {
	if vmi == nil {
		return nil
	}
	return vmi.VMICondition(t)
}

func isTrue(c *v1.VirtualMachineInstanceCondition) bool {
	return c != nil && c.Status == corev1.ConditionTrue
}

// reportExpansion records a warning event on a VM whose instance type or
// preference cannot be expanded, once per problem: not again while its
// Failure condition says the same.
func (c *Controller) reportExpansion(vm *v1.VirtualMachine, x expansionResult) {
	for _, cond := range vm.Status.Conditions {
		if cond.Type == v1.VirtualMachineFailure && cond.Reason == x.reason && cond.Message == x.err.Error() {
			return
		}
	}
	c.recorder.Eventf(vm, corev1.EventTypeWarning, x.reason, "%v", x.err)
}
