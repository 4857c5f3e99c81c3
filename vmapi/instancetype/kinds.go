package instancetype

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Labels of volumes (PersistentVolumeClaims, DataVolumes) naming the
// instance type and preference of a VM whose matcher says inferFromVolume.
const (
	DefaultInstancetypeLabel     = "instancetype.kubevirt.io/default-instancetype"
	DefaultInstancetypeKindLabel = "instancetype.kubevirt.io/default-instancetype-kind"
	DefaultPreferenceLabel       = "instancetype.kubevirt.io/default-preference"
	DefaultPreferenceKindLabel   = "instancetype.kubevirt.io/default-preference-kind"
)

// Labels of the ControllerRevisions holding the copies of instance types and
// preferences VMs use: the stored object's generation, kind, name, UID and
// API version.
const (
	ControllerRevisionObjectGenerationLabel = "instancetype.kubevirt.io/object-generation"
	ControllerRevisionObjectKindLabel       = "instancetype.kubevirt.io/object-kind"
	ControllerRevisionObjectNameLabel       = "instancetype.kubevirt.io/object-name"
	ControllerRevisionObjectUIDLabel        = "instancetype.kubevirt.io/object-uid"
	ControllerRevisionObjectVersionLabel    = "instancetype.kubevirt.io/object-version"
)

// Kinds a matcher names.
const (
	KindInstancetype        = "VirtualMachineInstancetype"
	KindClusterInstancetype = "VirtualMachineClusterInstancetype"
	KindPreference          = "VirtualMachinePreference"
	KindClusterPreference   = "VirtualMachineClusterPreference"
)

// InstancetypeKind returns the kind an InstancetypeMatcher's kind means:
// VirtualMachineInstancetype or VirtualMachineClusterInstancetype (the
// default), matched without regard to case and also by resource name, as
// KubeVirt does.
func InstancetypeKind(kind string) (string, error) {
	switch strings.ToLower(kind) {
	case "virtualmachineinstancetype", "virtualmachineinstancetypes":
		return KindInstancetype, nil
	case "", "virtualmachineclusterinstancetype", "virtualmachineclusterinstancetypes":
		return KindClusterInstancetype, nil
	}
	return "", fmt.Errorf("got unexpected kind in InstancetypeMatcher: %s", kind)
}

// PreferenceKind returns the kind a PreferenceMatcher's kind means:
// VirtualMachinePreference or VirtualMachineClusterPreference (the default).
func PreferenceKind(kind string) (string, error) {
	switch strings.ToLower(kind) {
	case "virtualmachinepreference", "virtualmachinepreferences":
		return KindPreference, nil
	case "", "virtualmachineclusterpreference", "virtualmachineclusterpreferences":
		return KindClusterPreference, nil
	}
	return "", fmt.Errorf("got unexpected kind in PreferenceMatcher: %s", kind)
}

// Annotate records on an instance's metadata the instance type and
// preference it was made with (either may be nil), in KubeVirt's
// annotations: kubevirt.io/instancetype-name or
// kubevirt.io/cluster-instancetype-name, kubevirt.io/preference-name or
// kubevirt.io/cluster-preference-name.
func Annotate(meta *metav1.ObjectMeta, instancetype, preference *v1.InstancetypeStatusRef) {
	set := func(key, value string) {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		meta.Annotations[key] = value
	}
	if instancetype != nil {
		if kind, err := InstancetypeKind(instancetype.Kind); err == nil && kind == KindInstancetype {
			set(v1.InstancetypeAnnotation, instancetype.Name)
		} else if err == nil {
			set(v1.ClusterInstancetypeAnnotation, instancetype.Name)
		}
	}
	if preference != nil {
		if kind, err := PreferenceKind(preference.Kind); err == nil && kind == KindPreference {
			set(v1.PreferenceAnnotation, preference.Name)
		} else if err == nil {
			set(v1.ClusterPreferenceAnnotation, preference.Name)
		}
	}
}
