// Package controllerref decides which objects a controller owns, adopting
// orphans that match and releasing owned objects that no longer match, as
// Kubernetes' controller-ref manager does. Adoption and release are merge
// patches of metadata.ownerReferences with a UID precondition, so they never
// touch an object that was deleted and recreated under the same name.
package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Manager claims objects for one owner.
type Manager struct {
	// Owner is the controller object (a VM, a replica set).
	Owner metav1.Object
	// OwnerKind is the owner's group, version and kind, for new references.
	OwnerKind schema.GroupVersionKind
	// Match reports whether the owner wants the object (same name, matching labels).
	Match func(obj metav1.Object) bool
	// Patch applies a JSON merge patch to the named object.
	Patch func(ctx context.Context, name string, patch []byte) error
	// Live, if set, reads the owner from the API server. It is called once,
	// before the first adoption, which fails if the owner is gone, was
	// replaced (another UID) or is being deleted, so that a stale cache
	// cannot adopt objects for a deleted owner.
	Live func(ctx context.Context) (metav1.Object, error)

	rechecked bool
}

// Claim reports whether the owner owns obj after adopting it (an orphan
// that matches) or releasing it (owned but no longer matching).
func (m *Manager) Claim(ctx context.Context, obj metav1.Object) (bool, error) {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		if ref.UID != m.Owner.GetUID() {
			return false, nil // someone else's
		}
		if m.Match(obj) {
			return true, nil
		}
		if m.Owner.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil {
			return true, nil // do not release during deletion
		}
		return false, m.release(ctx, obj)
	}
	if m.Owner.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil || !m.Match(obj) {
		return false, nil
	}
	if m.Live != nil && !m.rechecked {
		if err := m.recheck(ctx); err != nil {
			return false, fmt.Errorf("cannot adopt %s: %w", obj.GetName(), err)
		}
		m.rechecked = true
	}
	if err := m.adopt(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil // gone meanwhile
		}
		return false, err
	}
	return true, nil
}

// ClaimAll claims each of objs (Manager.Claim) and returns those the owner
// owns afterwards, in order, with every claim's error joined: one object
// that cannot be adopted does not keep the others from being counted.
func ClaimAll[T metav1.Object](ctx context.Context, m *Manager, objs []T) ([]T, error) {
	var owned []T
	var errs []error
	for _, obj := range objs {
		ok, err := m.Claim(ctx, obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			owned = append(owned, obj)
		}
	}
	return owned, errors.Join(errs...)
}

// Selector is an owner's spec.selector as a labels.Selector. A missing or
// empty selector is an error: it would select every object of the
// namespace.
func Selector(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil, errors.New("spec.selector: required, and must not be empty")
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	return s, nil
}

// Ref returns a controller owner reference to the owner, with
// blockOwnerDeletion, as set on objects the owner creates.
func Ref(owner metav1.Object, kind schema.GroupVersionKind) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         kind.GroupVersion().String(),
		Kind:               kind.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// recheck reads the owner live and fails unless it is the same object and
// not being deleted.
func (m *Manager) recheck(ctx context.Context) error {
	live, err := m.Live(ctx)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s %s/%s", m.OwnerKind.Kind, m.Owner.GetNamespace(), m.Owner.GetName())
	switch {
	case live.GetUID() != m.Owner.GetUID():
		return fmt.Errorf("%s was replaced", what)
	case live.GetDeletionTimestamp() != nil:
		return fmt.Errorf("%s is being deleted", what)
	}
	return nil
}

func (m *Manager) adopt(ctx context.Context, obj metav1.Object) error {
	refs := append(append([]metav1.OwnerReference{}, obj.GetOwnerReferences()...), Ref(m.Owner, m.OwnerKind))
	return m.patchRefs(ctx, obj, refs)
}

func (m *Manager) release(ctx context.Context, obj metav1.Object) error {
	var refs []metav1.OwnerReference
	for _, r := range obj.GetOwnerReferences() {
		if r.UID != m.Owner.GetUID() {
			refs = append(refs, r)
		}
	}
	err := m.patchRefs(ctx, obj, refs)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil // gone, or recreated with another UID: nothing of ours to release
	}
	return err
}

func (m *Manager) patchRefs(ctx context.Context, obj metav1.Object, refs []metav1.OwnerReference) error {
	if refs == nil {
		refs = []metav1.OwnerReference{}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": obj.GetUID(), "ownerReferences": refs},
	})
	if err != nil {
		return err
	}
	return m.Patch(ctx, obj.GetName(), patch)
}
