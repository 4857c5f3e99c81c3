package disruptionbudget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller queued
	}
	if !c.exp.Satisfied(key) {
		return nil // our last create or delete is not in the cache yet
	}
	var vmi *v1.VirtualMachineInstance
	if obj, ok, err := c.vmis.GetByKey(key); err != nil {
		return err
	} else if ok {
		vmi, _ = obj.(*v1.VirtualMachineInstance)
	}
	budgets, err := c.budgetsOf(key)
	if err != nil {
		return err
	}
	want := vmi != nil && Wanted(vmi, c.kubevirts)
	var keep *policyv1.PodDisruptionBudget
	var stale []*policyv1.PodDisruptionBudget
	for _, pdb := range budgets {
		switch {
		case pdb.DeletionTimestamp != nil:
			// going away already
		case !want, metav1.GetControllerOf(pdb).UID != vmi.UID, keep != nil:
			stale = append(stale, pdb)
		default:
			keep = pdb
		}
	}
	if len(stale) > 0 {
		return c.delete(ctx, key, vmi, stale)
	}
	if !want {
		if len(budgets) == 0 && vmi == nil {
			c.exp.Forget(key)
		}
		return nil
	}
	if keep == nil {
		return c.create(ctx, key, vmi)
	}
	min, migrationName, err := c.desired(vmi, keep)
	if err != nil {
		return err
	}
	if minAvailable(keep) == min && keep.Labels[MigrationNameLabel] == migrationName {
		return nil
	}
	return c.patch(ctx, namespace, vmi, keep, min, migrationName)
}

// Wanted reports whether the VMI should have a budget: it is neither final
// nor being deleted, and an eviction should migrate it (its eviction
// strategy, else the one of the KubeVirt CR in kubevirts, which may be nil,
// is LiveMigrate, or LiveMigrateIfPossible and it is LiveMigratable).
func Wanted(vmi *v1.VirtualMachineInstance, kubevirts cache.Store) bool {
	return !vmi.IsFinal() && vmi.DeletionTimestamp == nil && migration.MigratableOnEviction(vmi, kubevirts)
}

// NewBudget is the budget protecting vmi's launcher pods (KubeVirt's): it
// needs the VMI's name and UID.
func NewBudget(vmi *v1.VirtualMachineInstance) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    GenerateName,
			Namespace:       vmi.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, v1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{v1.CreatedByLabel: string(vmi.UID)}},
		},
	}
}

// budgetsOf returns the budgets controlled by a VMI of this name, oldest
// first.
func (c *Controller) budgetsOf(key string) ([]*policyv1.PodDisruptionBudget, error) {
	objs, err := c.budgets.ByIndex(byVMIIndex, key)
	if err != nil {
		return nil, err
	}
	out := make([]*policyv1.PodDisruptionBudget, 0, len(objs))
	for _, o := range objs {
		if pdb, ok := o.(*policyv1.PodDisruptionBudget); ok {
			out = append(out, pdb)
		}
	}
	slices.SortFunc(out, func(a, b *policyv1.PodDisruptionBudget) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// desired is the budget's minAvailable and migration label: 2 and the
// migration's name while a migration of the VMI is unfinished, or while
// the finished one the budget names still leaves more than one launcher pod
// of the VMI; else 1 and no label.
func (c *Controller) desired(vmi *v1.VirtualMachineInstance, pdb *policyv1.PodDisruptionBudget) (int, string, error) {
	ms, err := migration.MigrationsOf(c.migrations, vmi.Namespace, vmi.Name)
	if err != nil {
		return 0, "", err
	}
	slices.SortFunc(ms, func(a, b *v1.VirtualMachineInstanceMigration) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	// The label keeps naming the migration it was raised for while that
	// one is unfinished; else the oldest unfinished one (the migration
	// controller runs one at a time per VMI).
	var active string
	for _, m := range ms {
		if !m.IsFinal() && (active == "" || m.Name == pdb.Labels[MigrationNameLabel]) {
			active = m.Name
		}
	}
	if active != "" {
		return 2, active, nil
	}
	if name := pdb.Labels[MigrationNameLabel]; name != "" {
		pods, err := podindex.Of(c.pods, vmi)
		if err != nil {
			return 0, "", err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				running++
			}
		}
		if running > 1 {
			return 2, name, nil // the migration's other pod is still going away
		}
	}
	return 1, "", nil
}

func minAvailable(pdb *policyv1.PodDisruptionBudget) int {
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.Type != intstr.Int {
		return -1 // not ours to keep that way
	}
	return pdb.Spec.MinAvailable.IntValue()
}

func (c *Controller) create(ctx context.Context, key string, vmi *v1.VirtualMachineInstance) error {
	c.exp.ExpectCreations(key, 1)
	created, err := c.client.PodDisruptionBudgets(vmi.Namespace).Create(ctx, NewBudget(vmi), metav1.CreateOptions{})
	if err != nil {
		c.exp.CreationObserved(key)
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating a PodDisruptionBudget: %v", err)
		return fmt.Errorf("creating the PodDisruptionBudget of VirtualMachineInstance %s: %w", key, err)
	}
	klog.FromContext(ctx).V(2).Info("created a PodDisruptionBudget", "vmi", key, "budget", created.Name)
	c.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created PodDisruptionBudget %s", created.Name)
	return nil
}

func (c *Controller) delete(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, budgets []*policyv1.PodDisruptionBudget) error {
	uids := make([]types.UID, len(budgets))
	for i, pdb := range budgets {
		uids[i] = pdb.UID
	}
	c.exp.ExpectDeletions(key, uids...)
	var errs []error
	for _, pdb := range budgets {
		err := c.client.PodDisruptionBudgets(pdb.Namespace).Delete(ctx, pdb.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pdb.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			c.exp.DeletionObserved(key, pdb.UID) // gone already, or replaced by another object of that name
			continue
		}
		if err != nil {
			c.exp.DeletionObserved(key, pdb.UID)
			if vmi != nil {
				c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting the PodDisruptionBudget %s: %v", pdb.Name, err)
			}
			errs = append(errs, fmt.Errorf("deleting PodDisruptionBudget %s/%s of VirtualMachineInstance %s: %w", pdb.Namespace, pdb.Name, key, err))
			continue
		}
		klog.FromContext(ctx).V(2).Info("deleted a PodDisruptionBudget", "vmi", key, "budget", pdb.Name)
		if vmi != nil {
			c.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted PodDisruptionBudget %s", pdb.Name)
		}
	}
	return errors.Join(errs...)
}

// patch sets minAvailable and the migration label (removed when name is
// empty) in one merge patch.
func (c *Controller) patch(ctx context.Context, namespace string, vmi *v1.VirtualMachineInstance, pdb *policyv1.PodDisruptionBudget, min int, name string) error {
	var label any // null removes it
	if name != "" {
		label = name
	}
	spec := map[string]any{"minAvailable": min}
	if pdb.Spec.MaxUnavailable != nil {
		spec["maxUnavailable"] = nil // the API server refuses both
	}
	data, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]any{MigrationNameLabel: label}},
		"spec":     spec,
	})
	if err != nil {
		return err
	}
	if _, err := c.client.PodDisruptionBudgets(namespace).Patch(ctx, pdb.Name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedUpdate, "Error updating the PodDisruptionBudget %s: %v", pdb.Name, err)
		return fmt.Errorf("setting minAvailable %d on PodDisruptionBudget %s/%s of VirtualMachineInstance %s/%s: %w", min, namespace, pdb.Name, namespace, vmi.Name, err)
	}
	if name != "" {
		c.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonSuccessfulUpdate, "Expanded PodDisruptionBudget %s to protect migration %s", pdb.Name, name)
	} else {
		c.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonSuccessfulUpdate, "Shrank PodDisruptionBudget %s", pdb.Name)
	}
	return nil
}
