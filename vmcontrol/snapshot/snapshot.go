package snapshot

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// Condition reasons of snapshots and restores (KubeVirt's; KubeVirt puts
// its text in the reason and leaves the message empty).
const (
	reasonSourceNotLocked  = "Source not locked"
	reasonSourceLocked     = "Source locked and operation in progress"
	reasonSourceMissing    = "Source does not exist"
	reasonNotReady         = "Not ready"
	reasonReady            = "Ready"
	reasonComplete         = "Operation complete"
	reasonFailed           = "Operation failed"
	reasonDeadlineExceeded = "snapshot deadline exceeded"
	reasonDeleting         = "VM snapshot is deleting"
)

// Indication messages (KubeVirt's).
var indicationMessages = map[snapshotv1.Indication]string{
	snapshotv1.VMSnapshotOnlineSnapshotIndication: "Snapshot taken while the VM was running. Consistency depends on guest-agent quiescing.",
	snapshotv1.VMSnapshotGuestAgentIndication:     "Guest agent was active and attempted to quiesce the filesystem for application consistency.",
	snapshotv1.VMSnapshotNoGuestAgentIndication:   "Guest agent was not available. Snapshot is crash-consistent and may not be application-consistent.",
	snapshotv1.VMSnapshotPausedIndication:         "Snapshot taken while the VM was paused. Snapshot is crash-consistent and may not be application-consistent.",
}

// ContentName is the content of a snapshot: vmsnapshot-content-<UID>.
func ContentName(snap *snapshotv1.VirtualMachineSnapshot) string {
	if snap.Status != nil && snap.Status.VirtualMachineSnapshotContentName != nil {
		return *snap.Status.VirtualMachineSnapshotContentName
	}
	return "vmsnapshot-content-" + string(snap.UID)
}

func (c *Controller) syncSnapshot(ctx context.Context, key string) error {
	obj, ok, err := c.snapshots.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	snap := obj.(*snapshotv1.VirtualMachineSnapshot)
	ns := snap.Namespace
	vm := c.vm(ns + "/" + snap.Spec.Source.Name)
	content := c.content(ns, ContentName(snap))
	if snap.DeletionTimestamp != nil {
		return c.deleteSnapshot(ctx, snap, vm, content)
	}
	if !slices.Contains(snap.Finalizers, SnapshotFinalizer) {
		return patchFinalizers(ctx, c.cfg.Snapshots.VirtualMachineSnapshots(ns), snap.Name, snap.Finalizers, append(slices.Clone(snap.Finalizers), SnapshotFinalizer))
	}
	now := c.cfg.Now()
	status := &snapshotv1.VirtualMachineSnapshotStatus{Phase: snapshotv1.InProgress, ReadyToUse: ptr.To(false)}
	if snap.Status != nil {
		status = snap.Status.DeepCopy()
	}
	var requeue time.Duration
	switch {
	case status.Phase == snapshotv1.Succeeded || status.Phase == snapshotv1.Failed:
		// Done: let go of the source.
		if err := c.unlock(ctx, snap, vm); err != nil {
			return err
		}
	case c.deadlinePassed(snap, now):
		status.Phase = snapshotv1.Failed
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonFailed, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reasonNotReady, now)
		setCondition(&status.Conditions, snapshotv1.ConditionFailure, corev1.ConditionTrue, reasonDeadlineExceeded, now)
		if content != nil && !contentReady(content) {
			if err := c.deleteContent(ctx, content); err != nil {
				return err
			}
		}
	case vm == nil:
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonSourceMissing, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reasonNotReady, now)
		requeue = c.untilDeadline(snap, now)
	default:
		status.SourceUID = ptr.To(vm.UID)
		status.Indications, status.SourceIndications = c.indications(vm)
		locked, why, err := c.lock(ctx, snap, vm)
		if err != nil {
			return err
		}
		if !locked {
			setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonSourceNotLocked+why, now)
			setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reasonNotReady, now)
			requeue = min(c.untilDeadline(snap, now), 5*time.Second)
			break
		}
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, reasonSourceLocked, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reasonNotReady, now)
		if content == nil {
			if content, err = c.createContent(ctx, snap, vm); err != nil {
				return err
			}
		}
		if content.Status == nil || content.Status.ReadyToUse == nil || !*content.Status.ReadyToUse {
			// No volume backups: the content is complete once written.
			ready := content.DeepCopy()
			ready.Status = &snapshotv1.VirtualMachineSnapshotContentStatus{CreationTime: ptr.To(metav1.NewTime(now.Truncate(time.Second))), ReadyToUse: ptr.To(true)}
			if content, err = c.cfg.Snapshots.VirtualMachineSnapshotContents(ns).UpdateStatus(ctx, ready, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating the status of VirtualMachineSnapshotContent %s/%s: %w", ns, ready.Name, err)
			}
		}
		status.VirtualMachineSnapshotContentName = ptr.To(content.Name)
		status.CreationTime = content.Status.CreationTime
		status.ReadyToUse = content.Status.ReadyToUse
		status.Error = content.Status.Error
		status.Phase = snapshotv1.Succeeded
		status.SnapshotVolumes = snapshotVolumes(content)
		setCondition(&status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonComplete, now)
		setCondition(&status.Conditions, snapshotv1.ConditionReady, corev1.ConditionTrue, reasonReady, now)
		requeue = time.Second // unlock the source
	}
	if snap.Status == nil || !equality.Semantic.DeepEqual(snap.Status, status) {
		updated := snap.DeepCopy()
		updated.Status = status
		if _, err := c.cfg.Snapshots.VirtualMachineSnapshots(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("updating the status of VirtualMachineSnapshot %s: %w", key, err)
		}
	}
	if requeue > 0 {
		return reconcile.After(requeue)
	}
	return nil
}

// deadlinePassed: the snapshot has not succeeded within
// spec.failureDeadline (DefaultFailureDeadline; 0 means none).
func (c *Controller) deadlinePassed(snap *snapshotv1.VirtualMachineSnapshot, now time.Time) bool {
	d := snapshotv1.DefaultFailureDeadline
	if snap.Spec.FailureDeadline != nil {
		d = snap.Spec.FailureDeadline.Duration
	}
	return d > 0 && !now.Before(snap.CreationTimestamp.Add(d))
}

func (c *Controller) untilDeadline(snap *snapshotv1.VirtualMachineSnapshot, now time.Time) time.Duration {
	d := snapshotv1.DefaultFailureDeadline
	if snap.Spec.FailureDeadline != nil {
		d = snap.Spec.FailureDeadline.Duration
	}
	if d == 0 {
		return time.Minute
	}
	return max(snap.CreationTimestamp.Add(d).Sub(now), time.Second)
}

// indications say how the VM was: nothing when stopped; Online and one of
// Paused, GuestAgent, NoGuestAgent when its instance runs.
func (c *Controller) indications(vm *v1.VirtualMachine) ([]snapshotv1.Indication, []snapshotv1.SourceIndication) {
	obj, ok, _ := c.vmis.GetByKey(vm.Namespace + "/" + vm.Name)
	if !ok {
		return nil, nil
	}
	vmi := obj.(*v1.VirtualMachineInstance)
	if vmi.IsFinal() || vmi.Status.Phase != v1.Running {
		return nil, nil
	}
	ind := []snapshotv1.Indication{snapshotv1.VMSnapshotOnlineSnapshotIndication}
	switch {
	case conditionTrue(vmi, v1.VirtualMachineInstancePaused):
		ind = append(ind, snapshotv1.VMSnapshotPausedIndication)
	case conditionTrue(vmi, v1.VirtualMachineInstanceAgentConnected):
		ind = append(ind, snapshotv1.VMSnapshotGuestAgentIndication)
	default:
		ind = append(ind, snapshotv1.VMSnapshotNoGuestAgentIndication)
	}
	sort.Slice(ind, func(i, j int) bool { return ind[i] < ind[j] })
	src := make([]snapshotv1.SourceIndication, len(ind))
	for i, x := range ind {
		src[i] = snapshotv1.SourceIndication{Indication: x, Message: indicationMessages[x]}
	}
	return ind, src
}

func conditionTrue(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// lock makes the snapshot the VM's only one in progress
// (status.snapshotInProgress and the source finalizer) once its claims are
// bound; it returns false with KubeVirt's explanation while it cannot.
func (c *Controller) lock(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine) (bool, string, error) {
	if cur := vm.Status.SnapshotInProgress; cur != nil && *cur != snap.Name {
		return false, fmt.Sprintf(" snapshot %q in progress", *cur), nil
	}
	if vm.Spec.Template != nil {
		for _, vol := range vm.Spec.Template.Spec.Volumes {
			name := claimName(vol)
			if name == "" {
				continue
			}
			pvc := c.claim(vm.Namespace)(name)
			var problem string
			switch {
			case pvc == nil:
				problem = "volume doesnt exist: " + name
			case pvc.DeletionTimestamp != nil:
				problem = "volume is being deleted: " + name
			case pvc.Status.Phase != corev1.ClaimBound:
				problem = "volume not bound: " + name
			}
			if problem != "" {
				return false, fmt.Sprintf(" source %s/%s %s", vm.Namespace, vm.Name, problem), nil
			}
		}
	}
	if vm.Status.SnapshotInProgress == nil {
		if err := c.updateVMStatus(ctx, vm, func(st *v1.VirtualMachineStatus) { st.SnapshotInProgress = ptr.To(snap.Name) }); err != nil {
			return false, "", err
		}
	}
	if !slices.Contains(vm.Finalizers, SourceFinalizer) {
		if err := patchFinalizers(ctx, c.cfg.Client.VirtualMachines(vm.Namespace), vm.Name, vm.Finalizers, append(slices.Clone(vm.Finalizers), SourceFinalizer)); err != nil {
			return false, "", err
		}
	}
	return true, "", nil
}

// unlock releases the VM if the snapshot holds it.
func (c *Controller) unlock(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine) error {
	if vm == nil || vm.Status.SnapshotInProgress == nil || *vm.Status.SnapshotInProgress != snap.Name {
		return nil
	}
	if err := c.updateVMStatus(ctx, vm, func(st *v1.VirtualMachineStatus) { st.SnapshotInProgress = nil }); err != nil {
		return err
	}
	if !slices.Contains(vm.Finalizers, SourceFinalizer) {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(vm.Finalizers), func(f string) bool { return f == SourceFinalizer })
	return patchFinalizers(ctx, c.cfg.Client.VirtualMachines(vm.Namespace), vm.Name, vm.Finalizers, kept)
}

// createContent records the VM: its metadata (without managedFields) and
// spec, an empty status, no volume backups (no volume can be snapshotted).
func (c *Controller) createContent(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine) (*snapshotv1.VirtualMachineSnapshotContent, error) {
	meta := *vm.ObjectMeta.DeepCopy()
	meta.ManagedFields = nil
	content := &snapshotv1.VirtualMachineSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: ContentName(snap), Namespace: snap.Namespace, Finalizers: []string{ContentFinalizer}},
		Spec: snapshotv1.VirtualMachineSnapshotContentSpec{
			VirtualMachineSnapshotName: ptr.To(snap.Name),
			Source:                     snapshotv1.SourceSpec{VirtualMachine: &snapshotv1.VirtualMachine{ObjectMeta: meta, Spec: *vm.Spec.DeepCopy()}},
		},
	}
	created, err := c.cfg.Snapshots.VirtualMachineSnapshotContents(snap.Namespace).Create(ctx, content, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.cfg.Snapshots.VirtualMachineSnapshotContents(snap.Namespace).Get(ctx, content.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating VirtualMachineSnapshotContent %s/%s: %w", snap.Namespace, content.Name, err)
	}
	c.cfg.Recorder.Eventf(snap, corev1.EventTypeNormal, ReasonContentCreated, "Successfully created VirtualMachineSnapshotContent %s", content.Name)
	if excluded := snapshotVolumes(created).ExcludedVolumes; len(excluded) > 0 {
		c.cfg.Recorder.Eventf(snap, corev1.EventTypeNormal, ReasonVolumesNotSnapped,
			"Volumes not in the snapshot (no VolumeSnapshotClass or not a claim; see the VM's status.volumeSnapshotStatuses): %v", excluded)
	}
	return created, nil
}

// snapshotVolumes: the volumes with a backup are included, the others
// excluded, in the VM's order.
func snapshotVolumes(content *snapshotv1.VirtualMachineSnapshotContent) *snapshotv1.SnapshotVolumesLists {
	lists := &snapshotv1.SnapshotVolumesLists{}
	vm := content.Spec.Source.VirtualMachine
	if vm == nil || vm.Spec.Template == nil {
		return lists
	}
	backed := map[string]bool{}
	for _, b := range content.Spec.VolumeBackups {
		backed[b.VolumeName] = true
	}
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		if backed[vol.Name] {
			lists.IncludedVolumes = append(lists.IncludedVolumes, vol.Name)
		} else {
			lists.ExcludedVolumes = append(lists.ExcludedVolumes, vol.Name)
		}
	}
	return lists
}

func (c *Controller) content(ns, name string) *snapshotv1.VirtualMachineSnapshotContent {
	obj, ok, _ := c.contents.GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*snapshotv1.VirtualMachineSnapshotContent)
}

func contentReady(content *snapshotv1.VirtualMachineSnapshotContent) bool {
	return content.Status != nil && content.Status.ReadyToUse != nil && *content.Status.ReadyToUse
}

// deleteSnapshot handles a snapshot being deleted: its content goes unless
// kept (Retain, and ready), the source is released, then the finalizer.
func (c *Controller) deleteSnapshot(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine, content *snapshotv1.VirtualMachineSnapshotContent) error {
	if content != nil {
		retain := snap.Spec.DeletionPolicy != nil && *snap.Spec.DeletionPolicy == snapshotv1.VirtualMachineSnapshotContentRetain
		if !retain || !contentReady(content) {
			if err := c.deleteContent(ctx, content); err != nil {
				return err
			}
		} else if slices.Contains(content.Finalizers, ContentFinalizer) {
			kept := slices.DeleteFunc(slices.Clone(content.Finalizers), func(f string) bool { return f == ContentFinalizer })
			if err := patchFinalizers(ctx, c.cfg.Snapshots.VirtualMachineSnapshotContents(content.Namespace), content.Name, content.Finalizers, kept); err != nil {
				return err
			}
		}
	}
	if err := c.unlock(ctx, snap, vm); err != nil {
		return err
	}
	if !slices.Contains(snap.Finalizers, SnapshotFinalizer) {
		return nil
	}
	if snap.Status != nil && snap.Status.Phase == snapshotv1.InProgress {
		updated := snap.DeepCopy()
		updated.Status.Phase = snapshotv1.Deleting
		setCondition(&updated.Status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonDeleting, c.cfg.Now())
		if _, err := c.cfg.Snapshots.VirtualMachineSnapshots(snap.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating the status of VirtualMachineSnapshot %s/%s: %w", snap.Namespace, snap.Name, err)
		}
	}
	kept := slices.DeleteFunc(slices.Clone(snap.Finalizers), func(f string) bool { return f == SnapshotFinalizer })
	return patchFinalizers(ctx, c.cfg.Snapshots.VirtualMachineSnapshots(snap.Namespace), snap.Name, snap.Finalizers, kept)
}

// deleteContent removes the content's finalizer and deletes it.
func (c *Controller) deleteContent(ctx context.Context, content *snapshotv1.VirtualMachineSnapshotContent) error {
	contents := c.cfg.Snapshots.VirtualMachineSnapshotContents(content.Namespace)
	if slices.Contains(content.Finalizers, ContentFinalizer) {
		kept := slices.DeleteFunc(slices.Clone(content.Finalizers), func(f string) bool { return f == ContentFinalizer })
		if err := patchFinalizers(ctx, contents, content.Name, content.Finalizers, kept); err != nil {
			return err
		}
	}
	if err := contents.Delete(ctx, content.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting VirtualMachineSnapshotContent %s/%s: %w", content.Namespace, content.Name, err)
	}
	return nil
}

// patcher is what patchFinalizers needs of a typed client.
type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// patchFinalizers replaces metadata.finalizers of name with want, testing
// that they are still old (a JSON patch: a concurrent change conflicts).
func patchFinalizers[T any](ctx context.Context, client patcher[T], name string, old, want []string) error {
	if want == nil {
		want = []string{}
	}
	ops := []jsonpatch.Op{jsonpatch.Add("/metadata/finalizers", want)}
	if len(old) > 0 {
		ops = []jsonpatch.Op{jsonpatch.Test("/metadata/finalizers", old), jsonpatch.Replace("/metadata/finalizers", want)}
	}
	data, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return err
	}
	if _, err := client.Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching the finalizers of %s: %w", name, err)
	}
	return nil
}

// setCondition sets a condition (reason only, as KubeVirt), keeping its
// transition time unless its status or reason changed.
func setCondition(conds *[]snapshotv1.Condition, t snapshotv1.ConditionType, status corev1.ConditionStatus, reason string, now time.Time) {
	for i := range *conds {
		c := &(*conds)[i]
		if c.Type != t {
			continue
		}
		if c.Status != status || c.Reason != reason {
			c.Status, c.Reason, c.LastTransitionTime = status, reason, metav1.NewTime(now.Truncate(time.Second))
		}
		return
	}
	*conds = append(*conds, snapshotv1.Condition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
}
