package replicaset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/kvconfig"
	"github.com/vmkit/vmkit/vmcontrol/internal/scale"
)

// Reasons of the ReplicaFailure condition and of the events.
const (
	ReasonFailedCreate     = "FailedCreate"
	ReasonFailedDelete     = "FailedDelete"
	ReasonInvalidSelector  = "InvalidSelector"
	ReasonPaused           = "Paused"
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
)

// outcome is what a sync did, for the status.
type outcome struct {
	failure *v1.VirtualMachineInstanceReplicaSetCondition // a ReplicaFailure to report
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.rsLister.VirtualMachineInstanceReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		c.stale.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if c.stale.Stale(key, cached.ResourceVersion) {
		return nil // our own status write has not reached the cache
	}
	rs := cached.DeepCopy()
	var out outcome
	sel, err := controllerref.Selector(rs.Spec.Selector)
	if err != nil {
		out.failure = failure(ReasonInvalidSelector, err.Error())
		return c.writeStatus(ctx, key, rs, nil, sel, out)
	}
	owned, err := c.claim(ctx, rs, sel)
	if err != nil {
		return err
	}
	var active, finished []*v1.VirtualMachineInstance
	for _, vmi := range owned {
		switch {
		case vmi.DeletionTimestamp != nil:
		case vmi.IsFinal():
			finished = append(finished, vmi)
		default:
			active = append(active, vmi)
		}
	}
	var actErr error
	if c.exp.Satisfied(key) && rs.DeletionTimestamp == nil && !rs.Spec.Paused {
		actErr = c.scale(ctx, key, rs, active, finished, &out)
	}
	if err := c.writeStatus(ctx, key, rs, active, sel, out); err != nil {
		return errors.Join(actErr, err)
	}
	return actErr
}

// claim returns the VMIs the replica set owns, adopting matching orphans
// and releasing owned VMIs that stopped matching.
func (c *Controller) claim(ctx context.Context, rs *v1.VirtualMachineInstanceReplicaSet, sel labels.Selector) ([]*v1.VirtualMachineInstance, error) {
	all, err := c.vmiLister.VirtualMachineInstances(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	vmis := c.client.VirtualMachineInstances(rs.Namespace)
	m := &controllerref.Manager{
		Owner:     rs,
		OwnerKind: v1.VirtualMachineInstanceReplicaSetGroupVersionKind,
		Match:     func(o metav1.Object) bool { return sel.Matches(labels.Set(o.GetLabels())) },
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := vmis.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		Live: func(ctx context.Context) (metav1.Object, error) {
			return c.client.VirtualMachineInstanceReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		},
	}
	return controllerref.ClaimAll(ctx, m, all)
}

// scale deletes finished VMIs and creates or deletes VMIs until active
// has spec.replicas, raising expectations first.
func (c *Controller) scale(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet, active, finished []*v1.VirtualMachineInstance, out *outcome) error {
	want := int(replicas(rs))
	var doomed []*v1.VirtualMachineInstance
	doomed = append(doomed, finished...)
	if diff := len(active) - want; diff > 0 {
		ranked := slices.Clone(active)
		slices.SortStableFunc(ranked, deletionOrder)
		doomed = append(doomed, ranked[:diff]...)
	}
	if len(doomed) > 0 {
		if err := c.deleteVMIs(ctx, key, rs, doomed, out); err != nil {
			return err
		}
	}
	if missing := want - len(active); missing > 0 {
		return c.createVMIs(ctx, key, rs, missing, out)
	}
	return nil
}

// createVMIs creates n VMIs in slow-start batches (1, 2, 4, …), stopping
// after the first batch with an error.
func (c *Controller) createVMIs(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet, n int, out *outcome) error {
	kv := kvconfig.Of(c.kubevirts)
	template, err := NewVMI(rs, kv)
	if err != nil {
		out.failure = failure(ReasonFailedCreate, err.Error())
		if _, own := NewVMI(rs, nil); own == nil {
			return err // the KubeVirt CR's configuration: retried with back-off, as its edits enqueue nothing
		}
		return nil // the spec must change; its update brings us back
	}
	tried, failed := scale.Create(c.exp, key, n, func(int) error {
		_, err := c.client.VirtualMachineInstances(rs.Namespace).Create(ctx, template.DeepCopy(), metav1.CreateOptions{})
		return err
	})
	created := tried - len(failed)
	if len(failed) > 0 {
		// Skip what this sync would still have created: the next sync
		// starts again with a batch of one.
		c.recorder.Eventf(rs, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating VirtualMachineInstance: %v", failed[0])
		out.failure = failure(ReasonFailedCreate, failed[0].Error())
		if !scale.Retry(failed[0]) {
			return nil // the template must change first
		}
		return fmt.Errorf("creating VirtualMachineInstances of %s: %w", key, errors.Join(failed...))
	}
	c.recorder.Eventf(rs, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created %d VirtualMachineInstances", created)
	return nil
}

// deleteVMIs deletes vmis (with a UID precondition) under expectations.
func (c *Controller) deleteVMIs(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet, vmis []*v1.VirtualMachineInstance, out *outcome) error {
	uids := make([]types.UID, len(vmis))
	for i, vmi := range vmis {
		uids[i] = vmi.UID
	}
	return scale.Delete(c.exp, key, uids,
		func(i int) error {
			return c.client.VirtualMachineInstances(rs.Namespace).Delete(ctx, vmis[i].Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uids[i]}})
		},
		func(i int) {
			c.recorder.Eventf(rs, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted VirtualMachineInstance %s", vmis[i].Name)
		},
		func(i int, err error) error {
			c.recorder.Eventf(rs, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting VirtualMachineInstance %s: %v", vmis[i].Name, err)
			out.failure = failure(ReasonFailedDelete, err.Error())
			return fmt.Errorf("deleting VirtualMachineInstance %s/%s: %w", rs.Namespace, vmis[i].Name, err)
		})
}

// deletionOrder ranks VMIs for deletion, least progressed first: not yet
// scheduled (no phase, Pending), then Scheduling, then not ready, then the
// youngest; the oldest ready VMI goes last.
func deletionOrder(a, b *v1.VirtualMachineInstance) int {
	if ra, rb := progress(a), progress(b); ra != rb {
		return ra - rb
	}
	// Younger first.
	return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
}

// progress is how far a VMI got: 0 unscheduled, 1 scheduling, 2 scheduled
// or running but not ready, 3 ready.
func progress(vmi *v1.VirtualMachineInstance) int {
	switch vmi.Status.Phase {
	case v1.VmPhaseUnset, v1.Pending:
		return 0
	case v1.Scheduling:
		return 1
	}
	if ready(vmi) {
		return 3
	}
	return 2
}

func ready(vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func replicas(rs *v1.VirtualMachineInstanceReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return v1.DefaultReplicaSetReplicas
	}
	return *rs.Spec.Replicas
}

// NewVMI is the VMI the replica set creates from its template: a name
// generated from the replica set's, the template's labels and
// annotations, a controller reference to the replica set, and the spec
// defaults filled in with the configuration of the KubeVirt CR kv
// (v1.SetClusterDefaults; kv nil: KubeVirt's defaults).
func NewVMI(rs *v1.VirtualMachineInstanceReplicaSet, kv *v1.KubeVirt) (*v1.VirtualMachineInstance, error) {
	if rs.Spec.Template == nil {
		return nil, fmt.Errorf("VirtualMachineInstanceReplicaSet %s/%s: spec.template is required", rs.Namespace, rs.Name)
	}
	tmpl := rs.Spec.Template.DeepCopy()
	sel, err := controllerref.Selector(rs.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("VirtualMachineInstanceReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	// The reserved labels steer the node agents and the migration
	// controller: a template's never reach the VMI.
	vmiLabels := v1.WithoutReservedVMILabels(tmpl.ObjectMeta.Labels)
	if !sel.Matches(labels.Set(vmiLabels)) {
		return nil, fmt.Errorf("VirtualMachineInstanceReplicaSet %s/%s: spec.selector does not match spec.template.metadata.labels (without the labels reserved to KubeVirt's components)", rs.Namespace, rs.Name)
	}
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name,
			Namespace:       rs.Namespace,
			Labels:          vmiLabels,
			Annotations:     maps.Clone(tmpl.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{controllerref.Ref(rs, v1.VirtualMachineInstanceReplicaSetGroupVersionKind)},
		},
		Spec: tmpl.Spec,
	}
	if err := kvconfig.SetDefaults(&vmi.Spec, kv); err != nil {
		return nil, fmt.Errorf("VirtualMachineInstanceReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return vmi, nil
}

func failure(reason, message string) *v1.VirtualMachineInstanceReplicaSetCondition {
	return &v1.VirtualMachineInstanceReplicaSetCondition{
		Type: v1.VirtualMachineInstanceReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
		Reason: reason, Message: strings.TrimSpace(message),
	}
}

// writeStatus writes the status computed from the active VMIs when it
// changed.
func (c *Controller) writeStatus(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet, active []*v1.VirtualMachineInstance, sel labels.Selector, out outcome) error {
	status := calculateStatus(rs, active, sel, out, metav1.NewTime(c.now().Truncate(1e9)))
	if equality.Semantic.DeepEqual(status, rs.Status) {
		return nil
	}
	rs.Status = status
	if _, err := c.client.VirtualMachineInstanceReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the status of VirtualMachineInstanceReplicaSet %s: %w", key, err)
	}
	c.stale.Wrote(key, rs.ResourceVersion)
	return nil
}

// calculateStatus is the replica set's status: replicas and ready
// replicas among the active VMIs, the selector for the scale subresource,
// ReplicaFailure while a create or delete fails (kept until one succeeds
// or nothing is left to do) and ReplicaPaused while paused.
func calculateStatus(rs *v1.VirtualMachineInstanceReplicaSet, active []*v1.VirtualMachineInstance, sel labels.Selector, out outcome, now metav1.Time) v1.VirtualMachineInstanceReplicaSetStatus {
	s := v1.VirtualMachineInstanceReplicaSetStatus{Replicas: int32(len(active))}
	for _, vmi := range active {
		if ready(vmi) {
			s.ReadyReplicas++
		}
	}
	if sel != nil {
		s.LabelSelector = sel.String()
	}
	var conds []v1.VirtualMachineInstanceReplicaSetCondition
	if out.failure != nil {
		conds = append(conds, *out.failure)
	} else if old := condition(rs, v1.VirtualMachineInstanceReplicaSetReplicaFailure); old != nil && int(s.Replicas) != int(replicas(rs)) && !rs.Spec.Paused {
		conds = append(conds, *old) // still short: keep the last failure
	}
	if rs.Spec.Paused {
		conds = append(conds, v1.VirtualMachineInstanceReplicaSetCondition{
			Type: v1.VirtualMachineInstanceReplicaSetReplicaPaused, Status: corev1.ConditionTrue,
			Reason: ReasonPaused, Message: "spec.paused is true: no VirtualMachineInstance is created or deleted",
		})
	}
	for i := range conds {
		conds[i].LastTransitionTime, conds[i].LastProbeTime = now, metav1.Time{}
		if old := condition(rs, conds[i].Type); old != nil && old.Status == conds[i].Status {
			conds[i].LastTransitionTime = old.LastTransitionTime
		}
	}
	s.Conditions = conds
	return s
}

func condition(rs *v1.VirtualMachineInstanceReplicaSet, t v1.VirtualMachineInstanceReplicaSetConditionType) *v1.VirtualMachineInstanceReplicaSetCondition {
	for i := range rs.Status.Conditions {
		if rs.Status.Conditions[i].Type == t {
			return &rs.Status.Conditions[i]
		}
	}
	return nil
}
