package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/scale"
)

// Reasons of the ReplicaFailure condition (KubeVirt's FailedScaleOut and
// FailedScaleIn, and InvalidSelector), of ReplicaPaused and of the events
// (KubeVirt's).
const (
	ReasonFailedScaleOut   = "FailedScaleOut"
	ReasonFailedScaleIn    = "FailedScaleIn"
	ReasonInvalidSelector  = "InvalidSelector"
	ReasonPaused           = "SuccessfulPaused"
	ReasonResumed          = "SuccessfulResume"
	ReasonFailedCreate     = "FailedCreate"
	ReasonFailedDelete     = "FailedDelete"
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
)

// outcome is what a sync did, for the status.
type outcome struct {
	failure *poolv1beta1.VirtualMachinePoolCondition // a ReplicaFailure to report
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.poolLister.VirtualMachinePools(ns).Get(name)
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
	pool := cached.DeepCopy()
	var out outcome
	sel, err := controllerref.Selector(pool.Spec.Selector)
	if err != nil {
		out.failure = failure(ReasonInvalidSelector, err.Error())
		return c.writeStatus(ctx, key, pool, nil, nil, out)
	}
	all, err := c.vmLister.VirtualMachines(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	owned, err := c.claim(ctx, pool, sel, all)
	if err != nil {
		return err
	}
	var active []*v1.VirtualMachine
	for _, vm := range owned {
		if vm.DeletionTimestamp == nil {
			active = append(active, vm)
		}
	}
	var actErr error
	if c.exp.Satisfied(key) && pool.DeletionTimestamp == nil && !pool.Spec.Paused {
		actErr = c.scale(ctx, key, pool, active, all, &out)
	}
	if err := c.writeStatus(ctx, key, pool, active, sel, out); err != nil {
		return errors.Join(actErr, err)
	}
	return actErr
}

// claim returns the VMs the pool owns, adopting orphans that match its
// selector and are named <pool>-<index>, and releasing owned VMs that
// stopped matching.
func (c *Controller) claim(ctx context.Context, pool *poolv1beta1.VirtualMachinePool, sel labels.Selector, all []*v1.VirtualMachine) ([]*v1.VirtualMachine, error) {
	vms := c.client.VirtualMachines(pool.Namespace)
	m := &controllerref.Manager{
		Owner:     pool,
		OwnerKind: poolv1beta1.VirtualMachinePoolGroupVersionKind,
		Match: func(o metav1.Object) bool {
			_, named := IndexOf(pool.Name, o.GetName())
			return named && sel.Matches(labels.Set(o.GetLabels()))
		},
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := vms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		Live: func(ctx context.Context) (metav1.Object, error) {
			return c.poolClient.VirtualMachinePools(pool.Namespace).Get(ctx, pool.Name, metav1.GetOptions{})
		},
	}
	return controllerref.ClaimAll(ctx, m, all)
}

// scale creates or deletes VMs until active has spec.replicas, raising
// expectations first. all is every VM of the namespace: a new VM takes the
// lowest index no VM's name uses.
func (c *Controller) scale(ctx context.Context, key string, pool *poolv1beta1.VirtualMachinePool, active, all []*v1.VirtualMachine, out *outcome) error {
	want := int(replicas(pool))
	if diff := len(active) - want; diff > 0 {
		if !managesScaleIn(pool) {
			return nil
		}
		doomed, err := c.pickForScaleIn(pool, active, diff)
		if err != nil {
			out.failure = failure(ReasonFailedScaleIn, err.Error())
			return nil // the spec must change; its update brings us back
		}
		return c.deleteVMs(ctx, key, pool, doomed, out)
	}
	if missing := want - len(active); missing > 0 {
		return c.createVMs(ctx, key, pool, FreeIndexes(pool.Name, all, missing), out)
	}
	return nil
}

// managesScaleIn reports whether the pool deletes VMs when it shrinks: not
// with an Unmanaged or Opportunistic scale-in strategy, as KubeVirt.
func managesScaleIn(pool *poolv1beta1.VirtualMachinePool) bool {
	s := pool.Spec.ScaleInStrategy
	return s == nil || (s.Unmanaged == nil && s.Opportunistic == nil)
}

// FreeIndexes returns the n lowest indexes that no VM in vms is named
// after (<pool>-<index>), in ascending order, as KubeVirt picks them.
func FreeIndexes(pool string, vms []*v1.VirtualMachine, n int) []int {
	used := make(map[int]bool, len(vms))
	for _, vm := range vms {
		if i, ok := IndexOf(pool, vm.Name); ok {
			used[i] = true
		}
	}
	out := make([]int, 0, n)
	for i := 0; len(out) < n; i++ {
		if !used[i] {
			out = append(out, i)
		}
	}
	return out
}

// createVMs creates the VMs with the given indexes in slow-start batches
// (1, 2, 4, …), stopping after the first batch with an error.
func (c *Controller) createVMs(ctx context.Context, key string, pool *poolv1beta1.VirtualMachinePool, indexes []int, out *outcome) error {
	vms := make([]*v1.VirtualMachine, len(indexes))
	for i, idx := range indexes {
		vm, err := NewVM(pool, idx)
		if err != nil {
			out.failure = failure(ReasonFailedScaleOut, err.Error())
			return nil // the spec must change; its update brings us back
		}
		vms[i] = vm
	}
	_, failed := scale.Create(c.exp, key, len(vms), func(i int) error {
		vm := vms[i]
		if _, err := c.client.VirtualMachines(pool.Namespace).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("VirtualMachine %s: %w", vm.Name, err)
		}
		c.recorder.Eventf(pool, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created VM %s/%s", vm.Namespace, vm.Name)
		return nil
	})
	if len(failed) > 0 {
		// Skip what this sync would still have created: the next sync
		// starts again with a batch of one.
		c.recorder.Eventf(pool, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating VM: %v", failed[0])
		out.failure = failure(ReasonFailedScaleOut, "error during scale out: "+failed[0].Error())
		if !scale.Retry(failed[0]) {
			return nil // the template must change first
		}
		return fmt.Errorf("creating VirtualMachines of %s: %w", key, errors.Join(failed...))
	}
	return nil
}

// deleteVMs deletes vms (with a UID precondition) under expectations.
func (c *Controller) deleteVMs(ctx context.Context, key string, pool *poolv1beta1.VirtualMachinePool, vms []*v1.VirtualMachine, out *outcome) error {
	uids := make([]types.UID, len(vms))
	for i, vm := range vms {
		uids[i] = vm.UID
	}
	return scale.Delete(c.exp, key, uids,
		func(i int) error {
			return c.client.VirtualMachines(pool.Namespace).Delete(ctx, vms[i].Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uids[i]}})
		},
		func(i int) {
			c.recorder.Eventf(pool, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted VM %s/%s with uid %s from pool", vms[i].Namespace, vms[i].Name, uids[i])
		},
		func(i int, err error) error {
			vm := vms[i]
			c.recorder.Eventf(pool, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting virtual machine %s/%s: %v", vm.Namespace, vm.Name, err)
			out.failure = failure(ReasonFailedScaleIn, fmt.Sprintf("error during scale in: VirtualMachine %s: %v", vm.Name, err))
			return fmt.Errorf("deleting VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
		})
}

// pickForScaleIn returns the n VMs a scale-in deletes. With a proactive
// selection policy: those its selectors allow, in its sort order (Random
// when it names none), as KubeVirt. Without one: the least progressed
// first, then the highest index (scaleInOrder).
func (c *Controller) pickForScaleIn(pool *poolv1beta1.VirtualMachinePool, active []*v1.VirtualMachine, n int) ([]*v1.VirtualMachine, error) {
	ranked := slices.Clone(active)
	var policy *poolv1beta1.VirtualMachinePoolSelectionPolicy
	if s := pool.Spec.ScaleInStrategy; s != nil && s.Proactive != nil {
		policy = s.Proactive.SelectionPolicy
	}
	if policy == nil {
		slices.SortStableFunc(ranked, func(a, b *v1.VirtualMachine) int { return scaleInOrder(pool.Name, a, b) })
		return ranked[:n], nil
	}
	sortPolicy := poolv1beta1.VirtualMachinePoolSortPolicyRandom
	if policy.SortPolicy != nil {
		sortPolicy = *policy.SortPolicy
	}
	c.sortBy(pool.Name, ranked, sortPolicy)
	if policy.Selectors != nil {
		var err error
		if ranked, err = filterBySelectors(ranked, policy.Selectors); err != nil {
			return nil, err
		}
	}
	return ranked[:min(n, len(ranked))], nil
}

// sortBy orders vms by a KubeVirt sort policy.
func (c *Controller) sortBy(pool string, vms []*v1.VirtualMachine, policy poolv1beta1.VirtualMachinePoolSortPolicy) {
	index := func(vm *v1.VirtualMachine) int { i, _ := IndexOf(pool, vm.Name); return i }
	switch policy {
	case poolv1beta1.VirtualMachinePoolSortPolicyAscendingOrder:
		slices.SortStableFunc(vms, func(a, b *v1.VirtualMachine) int { return index(a) - index(b) })
	case poolv1beta1.VirtualMachinePoolSortPolicyDescendingOrder:
		slices.SortStableFunc(vms, func(a, b *v1.VirtualMachine) int { return index(b) - index(a) })
	case poolv1beta1.VirtualMachinePoolSortPolicyNewest:
		slices.SortStableFunc(vms, func(a, b *v1.VirtualMachine) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	case poolv1beta1.VirtualMachinePoolSortPolicyOldest:
		slices.SortStableFunc(vms, func(a, b *v1.VirtualMachine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	default: // Random, and what the schema's enum lets through nowhere else
		c.shuffle(len(vms), func(i, j int) { vms[i], vms[j] = vms[j], vms[i] })
	}
}

func randShuffle(n int, swap func(i, j int)) { rand.Shuffle(n, swap) }

// filterBySelectors keeps the VMs whose template labels match the label
// selector and whose template node selector matches the node selector
// requirements, as KubeVirt's selection policy selectors.
func filterBySelectors(vms []*v1.VirtualMachine, s *poolv1beta1.VirtualMachinePoolSelectors) ([]*v1.VirtualMachine, error) {
	var bylabel, bynode labels.Selector
	if s.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.scaleInStrategy.proactive.selectionPolicy.selectors.labelSelector: %w", err)
		}
		bylabel = sel
	}
	if s.NodeSelectorRequirementMatcher != nil {
		sel, err := nodeSelectorAsSelector(*s.NodeSelectorRequirementMatcher)
		if err != nil {
			return nil, fmt.Errorf("spec.scaleInStrategy.proactive.selectionPolicy.selectors.nodeSelectorRequirementMatcher: %w", err)
		}
		bynode = sel
	}
	var out []*v1.VirtualMachine
	for _, vm := range vms {
		var tmpl v1.VirtualMachineInstanceTemplateSpec
		if vm.Spec.Template != nil {
			tmpl = *vm.Spec.Template
		}
		if bylabel != nil && !bylabel.Matches(labels.Set(tmpl.ObjectMeta.Labels)) {
			continue
		}
		if bynode != nil && !bynode.Matches(labels.Set(tmpl.Spec.NodeSelector)) {
			continue
		}
		out = append(out, vm)
	}
	return out, nil
}

func nodeSelectorAsSelector(reqs []corev1.NodeSelectorRequirement) (labels.Selector, error) {
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}
	sel := labels.NewSelector()
	for _, r := range reqs {
		op, ok := ops[r.Operator]
		if !ok {
			return nil, fmt.Errorf("unknown operator %q", r.Operator)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

// scaleInOrder ranks VMs for deletion, least progressed first, then the
// highest index: a VM without an instance, then one starting, then one
// running but not ready; the ready VM with the lowest index goes last.
func scaleInOrder(pool string, a, b *v1.VirtualMachine) int {
	if pa, pb := progress(a), progress(b); pa != pb {
		return pa - pb
	}
	ia, _ := IndexOf(pool, a.Name)
	ib, _ := IndexOf(pool, b.Name)
	return ib - ia
}

// progress is how far a VM got: 0 no instance, 1 an instance not yet
// running, 2 running but not ready, 3 ready.
func progress(vm *v1.VirtualMachine) int {
	switch {
	case ready(vm):
		return 3
	case vm.Status.PrintableStatus == v1.VirtualMachineStatusRunning:
		return 2
	case vm.Status.Created:
		return 1
	}
	return 0
}

// ready reports the VM's Ready condition, which the VM controller mirrors
// from its instance (KubeVirt's pool counts ready replicas by it too).
func ready(vm *v1.VirtualMachine) bool {
	c := vm.VMCondition(v1.VirtualMachineReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func replicas(pool *poolv1beta1.VirtualMachinePool) int32 {
	if pool.Spec.Replicas == nil {
		return 1
	}
	return *pool.Spec.Replicas
}

// NewVM is the pool's VM with the given index, as KubeVirt makes it: named
// <pool>-<index>, the template's labels and annotations, a controller
// reference to the pool, and the template's spec with the index appended to
// the names that must differ per VM (IndexedSpec).
func NewVM(pool *poolv1beta1.VirtualMachinePool, index int) (*v1.VirtualMachine, error) {
	if pool.Spec.VirtualMachineTemplate == nil {
		return nil, fmt.Errorf("VirtualMachinePool %s/%s: spec.virtualMachineTemplate is required", pool.Namespace, pool.Name)
	}
	sel, err := controllerref.Selector(pool.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("VirtualMachinePool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	tmpl := pool.Spec.VirtualMachineTemplate
	if !sel.Matches(labels.Set(tmpl.ObjectMeta.Labels)) {
		return nil, fmt.Errorf("VirtualMachinePool %s/%s: spec.selector does not match spec.virtualMachineTemplate.metadata.labels", pool.Namespace, pool.Name)
	}
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            VMName(pool.Name, index),
			Namespace:       pool.Namespace,
			Labels:          maps.Clone(tmpl.ObjectMeta.Labels),
			Annotations:     maps.Clone(tmpl.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{controllerref.Ref(pool, poolv1beta1.VirtualMachinePoolGroupVersionKind)},
		},
		Spec: IndexedSpec(&pool.Spec, index),
	}, nil
}

// IndexedSpec is the template's VM spec for the VM with the given index,
// as KubeVirt's pool writes it: each dataVolumeTemplate's name gets
// -<index>, and so do the dataVolume and persistentVolumeClaim volumes
// naming one, so every VM gets its own volumes; with
// nameGeneration.appendIndexToConfigMapRefs the configMap volumes and
// sysprep ConfigMaps, with appendIndexToSecretRefs the secret volumes and
// the cloud-init and sysprep Secrets, name <name>-<index> too.
func IndexedSpec(spec *poolv1beta1.VirtualMachinePoolSpec, index int) v1.VirtualMachineSpec {
	out := spec.VirtualMachineTemplate.Spec.DeepCopy()
	suffix := fmt.Sprintf("-%d", index)
	dataVolumes := map[string]string{}
	for i := range out.DataVolumeTemplates {
		dv := &out.DataVolumeTemplates[i]
		dataVolumes[dv.ObjectMeta.Name] = dv.ObjectMeta.Name + suffix
		dv.ObjectMeta.Name += suffix
	}
	var configMaps, secrets bool
	if g := spec.NameGeneration; g != nil {
		configMaps = g.AppendIndexToConfigMapRefs != nil && *g.AppendIndexToConfigMapRefs
		secrets = g.AppendIndexToSecretRefs != nil && *g.AppendIndexToSecretRefs
	}
	if out.Template == nil {
		return *out
	}
	ref := func(r *corev1.LocalObjectReference, on bool) {
		if r != nil && on {
			r.Name += suffix
		}
	}
	for i := range out.Template.Spec.Volumes {
		vol := &out.Template.Spec.Volumes[i].VolumeSource
		switch {
		case vol.DataVolume != nil:
			if n, ok := dataVolumes[vol.DataVolume.Name]; ok {
				vol.DataVolume.Name = n
			}
		case vol.PersistentVolumeClaim != nil:
			if n, ok := dataVolumes[vol.PersistentVolumeClaim.ClaimName]; ok {
				vol.PersistentVolumeClaim.ClaimName = n
			}
		case vol.ConfigMap != nil:
			ref(&vol.ConfigMap.LocalObjectReference, configMaps)
		case vol.Secret != nil:
			if secrets {
				vol.Secret.SecretName += suffix
			}
		case vol.CloudInitNoCloud != nil:
			ref(vol.CloudInitNoCloud.UserDataSecretRef, secrets)
			ref(vol.CloudInitNoCloud.NetworkDataSecretRef, secrets)
		case vol.CloudInitConfigDrive != nil:
			ref(vol.CloudInitConfigDrive.UserDataSecretRef, secrets)
			ref(vol.CloudInitConfigDrive.NetworkDataSecretRef, secrets)
		case vol.Sysprep != nil:
			ref(vol.Sysprep.Secret, secrets)
			ref(vol.Sysprep.ConfigMap, configMaps)
		}
	}
	return *out
}

func failure(reason, message string) *poolv1beta1.VirtualMachinePoolCondition {
	return &poolv1beta1.VirtualMachinePoolCondition{
		Type: poolv1beta1.VirtualMachinePoolReplicaFailure, Status: corev1.ConditionTrue,
		Reason: reason, Message: strings.TrimSpace(message),
	}
}

// writeStatus writes the status computed from the active VMs when it
// changed, and records an event when the pool was paused or resumed.
func (c *Controller) writeStatus(ctx context.Context, key string, pool *poolv1beta1.VirtualMachinePool, active []*v1.VirtualMachine, sel labels.Selector, out outcome) error {
	status := calculateStatus(pool, active, sel, out, metav1.NewTime(c.now().Truncate(1e9)))
	if equality.Semantic.DeepEqual(status, pool.Status) {
		return nil
	}
	wasPaused := condition(&pool.Status, poolv1beta1.VirtualMachinePoolReplicaPaused) != nil
	pool.Status = status
	if _, err := c.poolClient.VirtualMachinePools(pool.Namespace).UpdateStatus(ctx, pool, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the status of VirtualMachinePool %s: %w", key, err)
	}
	c.stale.Wrote(key, pool.ResourceVersion)
	switch isPaused := condition(&status, poolv1beta1.VirtualMachinePoolReplicaPaused) != nil; {
	case isPaused && !wasPaused:
		c.recorder.Event(pool, corev1.EventTypeNormal, ReasonPaused, "Pool is paused")
	case !isPaused && wasPaused:
		c.recorder.Event(pool, corev1.EventTypeNormal, ReasonResumed, "Pool is unpaused")
	}
	return nil
}

// calculateStatus is the pool's status: replicas and ready replicas among
// the active VMs, the selector for the scale subresource, ReplicaFailure
// while a create or delete fails (kept until the pool has its replicas)
// and ReplicaPaused while paused.
func calculateStatus(pool *poolv1beta1.VirtualMachinePool, active []*v1.VirtualMachine, sel labels.Selector, out outcome, now metav1.Time) poolv1beta1.VirtualMachinePoolStatus {
	s := poolv1beta1.VirtualMachinePoolStatus{Replicas: int32(len(active))}
	for _, vm := range active {
		if ready(vm) {
			s.ReadyReplicas++
		}
	}
	if sel != nil {
		s.LabelSelector = sel.String()
	}
	var conds []poolv1beta1.VirtualMachinePoolCondition
	if out.failure != nil {
		conds = append(conds, *out.failure)
	} else if old := condition(&pool.Status, poolv1beta1.VirtualMachinePoolReplicaFailure); old != nil && s.Replicas != replicas(pool) && !pool.Spec.Paused {
		conds = append(conds, *old) // still short: keep the last failure
	}
	if pool.Spec.Paused {
		conds = append(conds, poolv1beta1.VirtualMachinePoolCondition{
			Type: poolv1beta1.VirtualMachinePoolReplicaPaused, Status: corev1.ConditionTrue,
			Reason: ReasonPaused, Message: "Pool controller is paused",
		})
	}
	for i := range conds {
		conds[i].LastTransitionTime, conds[i].LastProbeTime = now, metav1.Time{}
		if old := condition(&pool.Status, conds[i].Type); old != nil && old.Status == conds[i].Status {
			conds[i].LastTransitionTime = old.LastTransitionTime
		}
	}
	s.Conditions = conds
	return s
}

func condition(s *poolv1beta1.VirtualMachinePoolStatus, t poolv1beta1.VirtualMachinePoolConditionType) *poolv1beta1.VirtualMachinePoolCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}
