package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/cdi"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
)

// DataVolumeResource is CDI's DataVolume API, in which the controller
// creates each VM's spec.dataVolumeTemplates.
var DataVolumeResource = cdi.DataVolumeResource

// ImmediateDataVolumeCreationAnnotation set to "false" on a VM delays
// creating its DataVolumes until the VM is to run (KubeVirt's annotation; by
// default they are created with the VM).
const ImmediateDataVolumeCreationAnnotation = "kubevirt.io/immediate-data-volume-creation"

// Reasons of the Failure condition about DataVolumes.
const (
	// ReasonDataVolumesUnavailable: the VM has dataVolumeTemplates and the
	// cluster does not serve CDI's DataVolume API.
	ReasonDataVolumesUnavailable = "DataVolumesUnavailable"
	// ReasonDataVolumeForeign: a DataVolume of the VM's name is controlled
	// by another object.
	ReasonDataVolumeForeign = "DataVolumeOwnedByAnother"
	// ReasonDataVolumeError: CDI failed to populate a DataVolume.
	ReasonDataVolumeError = "DataVolumeError"
)

// dataVolumes is what a sync learned about the VM's DataVolumes.
type dataVolumes struct {
	// waiting: some template's DataVolume is missing or not yet usable
	// (usable: populated, or waiting for its first consumer).
	waiting bool
	// failed names DataVolumes CDI failed to populate.
	failed []string
	// reason and err are a problem to report in the Failure condition.
	reason string
	err    error
}

// syncDataVolumes creates the VM's missing DataVolumes (when the VM is to run
// or creation is immediate) and reports whether they are ready. A
// preference's preferredStorageClassName goes into those that name no
// storage class. The returned error is a failed API call, to retry.
func (c *Controller) syncDataVolumes(ctx context.Context, vm *v1.VirtualMachine, wantRun bool, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) (dataVolumes, error) {
	var dv dataVolumes
	if len(vm.Spec.DataVolumeTemplates) == 0 {
		return dv, nil
	}
	if c.dataVolumes == nil {
		return dataVolumes{waiting: true, reason: ReasonDataVolumesUnavailable,
			err: fmt.Errorf("VirtualMachine %s/%s: spec.dataVolumeTemplates need CDI, and the API server does not serve %s", vm.Namespace, vm.Name, DataVolumeResource.GroupResource())}, nil
	}
	create := wantRun || vm.Annotations[ImmediateDataVolumeCreationAnnotation] != "false"
	for i := range vm.Spec.DataVolumeTemplates {
		tmpl := &vm.Spec.DataVolumeTemplates[i]
		obj, exists, err := c.dataVolumes.GetByKey(vm.Namespace + "/" + tmpl.ObjectMeta.Name)
		if err != nil {
			return dv, err
		}
		if !exists {
			dv.waiting = true
			if !create {
				continue
			}
			err := c.createDataVolume(ctx, vm, i, pref)
			switch {
			case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || isSpecError(err):
				// Retrying will not help: report it until the VM's spec changes.
				dv.reason = ReasonFailedCreate
				dv.err = err
			case err != nil:
				return dv, err
			}
			continue
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return dv, fmt.Errorf("DataVolume %s/%s: unexpected %T in the cache", vm.Namespace, tmpl.ObjectMeta.Name, obj)
		}
		if ref := metav1.GetControllerOf(u); ref != nil && ref.UID != vm.UID {
			dv.waiting = true
			dv.reason = ReasonDataVolumeForeign
			dv.err = fmt.Errorf("VirtualMachine %s/%s: DataVolume %s of spec.dataVolumeTemplates[%d] exists and is controlled by %s %s", vm.Namespace, vm.Name, tmpl.ObjectMeta.Name, i, ref.Kind, ref.Name)
			continue
		}
		switch phase := cdi.Phase(u); {
		case cdi.Usable(phase):
		case phase == cdi.PhaseFailed:
			dv.waiting = true
			dv.failed = append(dv.failed, tmpl.ObjectMeta.Name)
		default:
			dv.waiting = true
		}
	}
	if len(dv.failed) > 0 && dv.err == nil {
		dv.reason = ReasonDataVolumeError
		dv.err = fmt.Errorf("VirtualMachine %s/%s: CDI failed to populate DataVolume(s) %v", vm.Namespace, vm.Name, dv.failed)
	}
	return dv, nil
}

// createDataVolume creates the DataVolume of the i-th template: its metadata
// and spec, in the VM's namespace, controlled by the VM and labelled with the
// VM's UID (kubevirt.io/created-by), as KubeVirt does.
func (c *Controller) createDataVolume(ctx context.Context, vm *v1.VirtualMachine, i int, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) error {
	u, err := NewDataVolume(vm, i)
	if err != nil {
		return &specError{err}
	}
	if pref != nil && pref.Volumes != nil && pref.Volumes.PreferredStorageClassName != "" {
		setStorageClass(u, pref.Volumes.PreferredStorageClassName)
	}
	_, err = c.dynamic.Resource(DataVolumeResource).Namespace(vm.Namespace).Create(ctx, u, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil // the cache has not seen it yet; its event brings us back
	case err != nil:
		c.recorder.Eventf(vm, corev1.EventTypeWarning, "FailedDataVolumeCreate", "Error creating DataVolume %s: %v", u.GetName(), err)
		return fmt.Errorf("VirtualMachine %s/%s: creating DataVolume %s of spec.dataVolumeTemplates[%d]: %w", vm.Namespace, vm.Name, u.GetName(), i, err)
	}
	c.recorder.Eventf(vm, corev1.EventTypeNormal, "SuccessfulDataVolumeCreate", "Created DataVolume %s", u.GetName())
	return nil
}

// setStorageClass sets the storage class of a DataVolume's pvc or storage
// that names none, as KubeVirt applies a preference's
// preferredStorageClassName to dataVolumeTemplates.
func setStorageClass(dv *unstructured.Unstructured, class string) {
	for _, part := range []string{"pvc", "storage"} {
		m, ok, _ := unstructured.NestedMap(dv.Object, "spec", part)
		if !ok {
			continue
		}
		if _, set := m["storageClassName"]; !set {
			_ = unstructured.SetNestedField(dv.Object, class, "spec", part, "storageClassName")
		}
	}
}

// specError is a template the controller cannot turn into a DataVolume.
type specError struct{ err error }

func (e *specError) Error() string { return e.err.Error() }
func (e *specError) Unwrap() error { return e.err }

func isSpecError(err error) bool {
	var s *specError
	return errors.As(err, &s)
}

// NewDataVolume builds the DataVolume of the VM's i-th dataVolumeTemplate.
func NewDataVolume(vm *v1.VirtualMachine, i int) (*unstructured.Unstructured, error) {
	if i < 0 || i >= len(vm.Spec.DataVolumeTemplates) {
		return nil, fmt.Errorf("VirtualMachine %s/%s has no spec.dataVolumeTemplates[%d]", vm.Namespace, vm.Name, i)
	}
	tmpl := &vm.Spec.DataVolumeTemplates[i]
	field := fmt.Sprintf("spec.dataVolumeTemplates[%d]", i)
	if tmpl.ObjectMeta.Name == "" {
		return nil, fmt.Errorf("VirtualMachine %s/%s: %s.metadata.name is required", vm.Namespace, vm.Name, field)
	}
	var spec map[string]any
	if len(tmpl.Spec.Raw) > 0 {
		if err := json.Unmarshal(tmpl.Spec.Raw, &spec); err != nil {
			return nil, fmt.Errorf("VirtualMachine %s/%s: %s.spec: %w", vm.Namespace, vm.Name, field, err)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(DataVolumeResource.GroupVersion().String())
	u.SetKind("DataVolume")
	u.SetName(tmpl.ObjectMeta.Name)
	u.SetNamespace(vm.Namespace)
	labels := maps.Clone(tmpl.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.CreatedByLabel] = string(vm.UID)
	u.SetLabels(labels)
	u.SetAnnotations(tmpl.ObjectMeta.Annotations)
	u.SetOwnerReferences([]metav1.OwnerReference{controllerref.Ref(vm, v1.VirtualMachineGroupVersionKind)})
	return u, nil
}
