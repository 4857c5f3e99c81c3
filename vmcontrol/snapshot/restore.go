package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// Restore condition reasons (KubeVirt's).
const (
	reasonInitializing    = "Initializing VirtualMachineRestore"
	reasonUpdatingTarget  = "Updating target spec"
	reasonWaitingUpdate   = "Waiting for target update"
	reasonRestoreDeleting = "VM restore is deleting"
	reasonWaitStop        = "Waiting for target VM to be powered off. Please stop the restore target to proceed with restore"
	reasonFailImmediate   = "Restore target VMI must be powered off before restore operation"
)

// restoreError is an error the restore reports in its conditions and
// retries (KubeVirt's non-fatal restore errors).
type restoreError struct{ msg string }

func (e *restoreError) Error() string { return e.msg }

func restoreErrorf(format string, a ...any) error { return &restoreError{fmt.Sprintf(format, a...)} }

// restoreID is what LastRestoreAnnotation holds once the restore wrote
// the VM.
func restoreID(r *snapshotv1.VirtualMachineRestore) string { return r.Name + "-" + string(r.UID) }

func (c *Controller) syncRestore(ctx context.Context, key string) error {
	obj, ok, err := c.restores.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	r := obj.(*snapshotv1.VirtualMachineRestore)
	ns := r.Namespace
	vm := c.vm(ns + "/" + r.Spec.Target.Name)
	restores := c.cfg.Snapshots.VirtualMachineRestores(ns)
	now := c.cfg.Now()
	if r.DeletionTimestamp != nil {
		if vm != nil && vm.Status.RestoreInProgress != nil && *vm.Status.RestoreInProgress == r.Name {
			if err := c.updateVMStatus(ctx, vm, func(st *v1.VirtualMachineStatus) { st.RestoreInProgress = nil }); err != nil {
				return err
			}
		}
		if !slices.Contains(r.Finalizers, RestoreFinalizer) {
			return nil
		}
		kept := slices.DeleteFunc(slices.Clone(r.Finalizers), func(f string) bool { return f == RestoreFinalizer })
		return patchFinalizers(ctx, restores, r.Name, r.Finalizers, kept)
	}
	if r.Status == nil {
		updated := r.DeepCopy()
		updated.Status = &snapshotv1.VirtualMachineRestoreStatus{Complete: ptr.To(false)}
		setCondition(&updated.Status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, reasonInitializing, now)
		setCondition(&updated.Status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reasonInitializing, now)
		return c.writeRestoreStatus(ctx, r, updated.Status)
	}
	if ptr.Deref(r.Status.Complete, false) || hasCondition(r.Status.Conditions, snapshotv1.ConditionFailure) {
		return nil
	}
	if !slices.Contains(r.Finalizers, RestoreFinalizer) || (vm != nil && !metav1.IsControlledBy(r, vm) && metav1.GetControllerOf(r) == nil) {
		updated := r.DeepCopy()
		if !slices.Contains(updated.Finalizers, RestoreFinalizer) {
			updated.Finalizers = append(updated.Finalizers, RestoreFinalizer)
		}
		if vm != nil && metav1.GetControllerOf(updated) == nil {
			updated.OwnerReferences = append(updated.OwnerReferences, *metav1.NewControllerRef(vm, v1.VirtualMachineGroupVersionKind))
		}
		if _, err := restores.Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating VirtualMachineRestore %s: %w", key, err)
		}
		return nil
	}
	status := r.Status.DeepCopy()
	progress := func(reason, ready string) {
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, reason, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, ready, now)
	}
	stuck := func(reason string) {
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reason, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reason, now)
	}
	fail := func(reason string) error {
		stuck(reason)
		setCondition(&status.Conditions, snapshotv1.ConditionFailure, corev1.ConditionTrue, reason, now)
		c.cfg.Recorder.Eventf(r, corev1.EventTypeWarning, ReasonOperationFailed, "VirtualMachineRestore failed %s", reason)
		return c.writeRestoreStatus(ctx, r, status)
	}

	// The target must be stopped.
	if vm != nil && c.vmiExists(ns, vm.Name) {
		policy := ptr.Deref(r.Spec.TargetReadinessPolicy, snapshotv1.VirtualMachineRestoreWaitGracePeriodAndFail)
		grace := snapshotv1.DefaultGracePeriod
		switch policy {
		case snapshotv1.VirtualMachineRestoreFailImmediate:
			return fail(reasonFailImmediate)
		case snapshotv1.VirtualMachineRestoreStopTarget:
			c.cfg.Recorder.Event(r, corev1.EventTypeNormal, ReasonStoppingTarget, ReasonStoppingTarget)
			stuck(ReasonStoppingTarget)
			if err := c.haltVM(ctx, vm); err != nil {
				return err
			}
		case snapshotv1.VirtualMachineRestoreWaitEventually:
			c.cfg.Recorder.Event(r, corev1.EventTypeWarning, ReasonTargetNotReady, "Restore target VMI still exists, please stop the restore target to proceed with restore")
			stuck(reasonWaitStop)
		default:
			if !now.Before(r.CreationTimestamp.Add(grace)) {
				return fail(fmt.Sprintf("Restore target failed to be ready within %v. Please power off the target VM before attempting restore", grace))
			}
			c.cfg.Recorder.Event(r, corev1.EventTypeWarning, ReasonTargetNotReady, "Restore target VMI still exists, please stop the restore target to proceed with restore")
			stuck(fmt.Sprintf("%s, or the operation will fail after %v", reasonWaitStop, grace))
		}
		if err := c.writeRestoreStatus(ctx, r, status); err != nil {
			return err
		}
		return reconcile.After(2 * time.Second)
	}

	err = c.restore(ctx, r, vm)
	var rerr *restoreError
	if errors.As(err, &rerr) {
		stuck(rerr.msg)
		c.cfg.Recorder.Eventf(r, corev1.EventTypeWarning, ReasonRestoreError, "VirtualMachineRestore encountered error %s", rerr.msg)
		if werr := c.writeRestoreStatus(ctx, r, status); werr != nil {
			return werr
		}
		return err // retried with back-off
	}
	if err != nil {
		return err
	}
	if vm != nil && vm.Annotations[LastRestoreAnnotation] == restoreID(r) {
		// The VM has the snapshot's spec: done.
		if vm.Status.RestoreInProgress != nil && *vm.Status.RestoreInProgress == r.Name {
			if err := c.updateVMStatus(ctx, vm, func(st *v1.VirtualMachineStatus) { st.RestoreInProgress = nil }); err != nil {
				return err
			}
		}
		status.Complete = ptr.To(true)
		status.RestoreTime = ptr.To(metav1.NewTime(now.Truncate(time.Second)))
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonComplete, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionTrue, reasonComplete, now)
		c.cfg.Recorder.Eventf(r, corev1.EventTypeNormal, ReasonRestoreComplete, "Successfully completed VirtualMachineRestore %s", r.Name)
	} else {
		progress(reasonUpdatingTarget, reasonWaitingUpdate)
	}
	return c.writeRestoreStatus(ctx, r, status)
}

// restore checks the snapshot and writes it into the target VM (or creates
// the VM), once.
func (c *Controller) restore(ctx context.Context, r *snapshotv1.VirtualMachineRestore, vm *v1.VirtualMachine) error {
	ns := r.Namespace
	snapKey := ns + "/" + r.Spec.VirtualMachineSnapshotName
	obj, ok, _ := c.snapshots.GetByKey(snapKey)
	if !ok {
		return restoreErrorf("VMSnapshot %s does not exist", snapKey)
	}
	snap := obj.(*snapshotv1.VirtualMachineSnapshot)
	switch {
	case snap.Status != nil && snap.Status.Phase == snapshotv1.Failed:
		return restoreErrorf("VMSnapshot %s failed and is invalid to use", snapKey)
	case snap.Status == nil || !ptr.Deref(snap.Status.ReadyToUse, false):
		return restoreErrorf("VMSnapshot %s not ready", snapKey)
	case snap.Status.VirtualMachineSnapshotContentName == nil:
		return restoreErrorf("no snapshot content name in %s", snapKey)
	}
	content := c.content(ns, *snap.Status.VirtualMachineSnapshotContentName)
	switch {
	case content == nil:
		return restoreErrorf("VMSnapshotContent %s/%s does not exist", ns, *snap.Status.VirtualMachineSnapshotContentName)
	case !contentReady(content) || content.Spec.Source.VirtualMachine == nil:
		return restoreErrorf("VMSnapshotContent %s/%s not ready", ns, content.Name)
	}
	source := content.Spec.Source.VirtualMachine
	if vm != nil && vm.Annotations[LastRestoreAnnotation] == restoreID(r) {
		return nil // written already
	}
	if vm != nil && snap.Status.SourceUID != nil && vm.UID != *snap.Status.SourceUID {
		return restoreErrorf("restore source and restore target are different but restore target already exists")
	}
	if vm == nil {
		return c.createTarget(ctx, r, source)
	}
	if cur := vm.Status.RestoreInProgress; cur != nil && *cur != r.Name {
		return restoreErrorf("vm restore %s in progress", *cur)
	}
	if vm.Status.RestoreInProgress == nil {
		if err := c.updateVMStatus(ctx, vm, func(st *v1.VirtualMachineStatus) { st.RestoreInProgress = ptr.To(r.Name) }); err != nil {
			return err
		}
	}
	// The snapshot's spec, the VM's own run strategy and metadata.
	updated := vm.DeepCopy()
	updated.Spec = *source.Spec.DeepCopy()
	dropMemoryDumps(&updated.Spec)
	if source.Spec.Running != nil {
		updated.Spec.Running, updated.Spec.RunStrategy = ptr.To(false), nil
	} else {
		updated.Spec.Running, updated.Spec.RunStrategy = vm.Spec.Running, vm.Spec.RunStrategy
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[LastRestoreAnnotation] = restoreID(r)
	if _, err := c.cfg.Client.VirtualMachines(ns).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("restoring VirtualMachine %s/%s: %w", ns, vm.Name, err)
	}
	return nil
}

// createTarget creates the VM a restore names when it does not exist:
// the snapshot's labels, annotations and spec, halted, with the restore's
// JSON patches applied.
func (c *Controller) createTarget(ctx context.Context, r *snapshotv1.VirtualMachineRestore, source *snapshotv1.VirtualMachine) error {
	vm := &v1.VirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{
			Name: r.Spec.Target.Name, Namespace: r.Namespace,
			Labels: source.Labels, Annotations: map[string]string{},
		},
		Spec: *source.Spec.DeepCopy(),
	}
	for k, v := range source.Annotations {
		vm.Annotations[k] = v
	}
	vm.Annotations[LastRestoreAnnotation] = restoreID(r)
	dropMemoryDumps(&vm.Spec)
	if vm.Spec.Running != nil {
		vm.Spec.Running = ptr.To(false)
	} else {
		vm.Spec.RunStrategy = ptr.To(v1.RunStrategyHalted)
	}
	if len(r.Spec.Patches) > 0 {
		raw, err := json.Marshal(vm)
		if err != nil {
			return err
		}
		patch, err := jsonpatch.DecodePatch([]byte("[" + strings.Join(r.Spec.Patches, ",") + "]"))
		if err != nil {
			return restoreErrorf("spec.patches: %v", err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			return restoreErrorf("spec.patches: %v", err)
		}
		patched := &v1.VirtualMachine{}
		if err := json.Unmarshal(raw, patched); err != nil {
			return restoreErrorf("spec.patches: the patched VirtualMachine: %v", err)
		}
		patched.Namespace = r.Namespace
		vm = patched
	}
	if _, err := c.cfg.Client.VirtualMachines(r.Namespace).Create(ctx, vm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating VirtualMachine %s/%s from the snapshot: %w", r.Namespace, vm.Name, err)
	}
	return nil
}

// dropMemoryDumps removes memoryDump volumes, as KubeVirt's restore does.
func dropMemoryDumps(spec *v1.VirtualMachineSpec) {
	if spec.Template == nil {
		return
	}
	spec.Template.Spec.Volumes = slices.DeleteFunc(spec.Template.Spec.Volumes, func(v v1.Volume) bool { return v.MemoryDump != nil })
}

// haltVM sets the VM's run strategy to Halted (what virtctl stop does).
func (c *Controller) haltVM(ctx context.Context, vm *v1.VirtualMachine) error {
	patch := []byte(`{"spec":{"runStrategy":"Halted","running":null}}`)
	if _, err := c.cfg.Client.VirtualMachines(vm.Namespace).Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("stopping VirtualMachine %s/%s for a restore: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}

func (c *Controller) vmiExists(ns, name string) bool {
	_, ok, _ := c.vmis.GetByKey(ns + "/" + name)
	return ok
}

func hasCondition(conds []snapshotv1.Condition, t snapshotv1.ConditionType) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (c *Controller) writeRestoreStatus(ctx context.Context, r *snapshotv1.VirtualMachineRestore, status *snapshotv1.VirtualMachineRestoreStatus) error {
	if r.Status != nil && equality.Semantic.DeepEqual(r.Status, status) {
		return nil
	}
	updated := r.DeepCopy()
	updated.Status = status
	if _, err := c.cfg.Snapshots.VirtualMachineRestores(r.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating the status of VirtualMachineRestore %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}
