package instancetype

import (
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Object is one of the four kinds of instancetype.kubevirt.io/v1beta1.
type Object interface {
	metav1.Object
	runtime.Object
}

// RevisionName is the name of the ControllerRevision in which a VM keeps its
// copy of obj, as KubeVirt names it:
// <vm>-<object name>-<object API version>-<object UID>-<object generation>.
// An edit of the object (a new generation) gets a new name.
func RevisionName(vmName string, obj metav1.Object) string {
	return fmt.Sprintf("%s-%s-%s-%s-%d", vmName, obj.GetName(), instancetypev1beta1.SchemeGroupVersion.Version, obj.GetUID(), obj.GetGeneration())
}

// NewControllerRevision is the ControllerRevision in which vm keeps its copy
// of obj (an instance type or preference), as KubeVirt's: named by
// RevisionName, controlled by the VM (so it goes with the VM), labelled with
// the object's kind, name, UID, generation and version, and holding the
// object with its kind and without labels, annotations, finalizers, owner
// references and managed fields.
func NewControllerRevision(vm *v1.VirtualMachine, obj Object) (*appsv1.ControllerRevision, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	cp, ok := obj.DeepCopyObject().(Object)
	if !ok {
		return nil, fmt.Errorf("instancetype: copying %T", obj)
	}
	cp.GetObjectKind().SetGroupVersionKind(gvk)
	cp.SetLabels(nil)
	cp.SetAnnotations(nil)
	cp.SetFinalizers(nil)
	cp.SetOwnerReferences(nil)
	cp.SetManagedFields(nil)
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("instancetype: encoding %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            RevisionName(vm.Name, obj),
			Namespace:       vm.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1.VirtualMachineGroupVersionKind)},
			Labels: map[string]string{
				ControllerRevisionObjectGenerationLabel: strconv.FormatInt(obj.GetGeneration(), 10),
				ControllerRevisionObjectKindLabel:       gvk.Kind,
				ControllerRevisionObjectNameLabel:       obj.GetName(),
				ControllerRevisionObjectUIDLabel:        string(obj.GetUID()),
				ControllerRevisionObjectVersionLabel:    gvk.Version,
			},
		},
		Data: runtime.RawExtension{Raw: data},
	}, nil
}

func kindOf(obj Object) (schema.GroupVersionKind, error) {
	switch obj.(type) {
	case *instancetypev1beta1.VirtualMachineInstancetype:
		return instancetypev1beta1.VirtualMachineInstancetypeGroupVersionKind, nil
	case *instancetypev1beta1.VirtualMachineClusterInstancetype:
		return instancetypev1beta1.VirtualMachineClusterInstancetypeGroupVersionKind, nil
	case *instancetypev1beta1.VirtualMachinePreference:
		return instancetypev1beta1.VirtualMachinePreferenceGroupVersionKind, nil
	case *instancetypev1beta1.VirtualMachineClusterPreference:
		return instancetypev1beta1.VirtualMachineClusterPreferenceGroupVersionKind, nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("instancetype: %T is not an instance type or preference", obj)
}

// FromRevision decodes the instance type or preference a ControllerRevision
// holds (its data, or its object when a client decoded it already).
func FromRevision(rev *appsv1.ControllerRevision) (Object, error) {
	raw := rev.Data.Raw
	if raw == nil && rev.Data.Object != nil {
		var err error
		if raw, err = json.Marshal(rev.Data.Object); err != nil {
			return nil, fmt.Errorf("instancetype: ControllerRevision %s: %w", rev.Name, err)
		}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("instancetype: ControllerRevision %s: %w", rev.Name, err)
	}
	var obj Object
	switch gvk := tm.GroupVersionKind(); gvk {
	case instancetypev1beta1.VirtualMachineInstancetypeGroupVersionKind:
		obj = &instancetypev1beta1.VirtualMachineInstancetype{}
	case instancetypev1beta1.VirtualMachineClusterInstancetypeGroupVersionKind:
		obj = &instancetypev1beta1.VirtualMachineClusterInstancetype{}
	case instancetypev1beta1.VirtualMachinePreferenceGroupVersionKind:
		obj = &instancetypev1beta1.VirtualMachinePreference{}
	case instancetypev1beta1.VirtualMachineClusterPreferenceGroupVersionKind:
		obj = &instancetypev1beta1.VirtualMachineClusterPreference{}
	default:
		return nil, fmt.Errorf("instancetype: ControllerRevision %s holds %s, not an instancetype.kubevirt.io/v1beta1 instance type or preference", rev.Name, gvk)
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("instancetype: ControllerRevision %s: %w", rev.Name, err)
	}
	return obj, nil
}

// InstancetypeSpec is the spec of an instance type of either kind.
func InstancetypeSpec(obj Object) (*instancetypev1beta1.VirtualMachineInstancetypeSpec, error) {
	switch o := obj.(type) {
	case *instancetypev1beta1.VirtualMachineInstancetype:
		return &o.Spec, nil
	case *instancetypev1beta1.VirtualMachineClusterInstancetype:
		return &o.Spec, nil
	}
	return nil, fmt.Errorf("instancetype: %s is a %T, not an instance type", obj.GetName(), obj)
}

// PreferenceSpec is the spec of a preference of either kind.
func PreferenceSpec(obj Object) (*instancetypev1beta1.VirtualMachinePreferenceSpec, error) {
	switch o := obj.(type) {
	case *instancetypev1beta1.VirtualMachinePreference:
		return &o.Spec, nil
	case *instancetypev1beta1.VirtualMachineClusterPreference:
		return &o.Spec, nil
	}
	return nil, fmt.Errorf("instancetype: %s is a %T, not a preference", obj.GetName(), obj)
}

// SameObject reports whether two ControllerRevisions hold the same kind of
// object with the same spec, as KubeVirt compares an existing revision with
// the one it was about to create.
func SameObject(a, b *appsv1.ControllerRevision) (bool, error) {
	oa, err := FromRevision(a)
	if err != nil {
		return false, err
	}
	ob, err := FromRevision(b)
	if err != nil {
		return false, err
	}
	if oa.GetObjectKind().GroupVersionKind() != ob.GetObjectKind().GroupVersionKind() {
		return false, nil
	}
	if sa, err := InstancetypeSpec(oa); err == nil {
		sb, _ := InstancetypeSpec(ob)
		return equality.Semantic.DeepEqual(sa, sb), nil
	}
	sa, _ := PreferenceSpec(oa)
	sb, _ := PreferenceSpec(ob)
	return equality.Semantic.DeepEqual(sa, sb), nil
}
