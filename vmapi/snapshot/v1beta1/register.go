package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the snapshot kinds.
const GroupName = "snapshot.kubevirt.io"

// SchemeGroupVersion is snapshot.kubevirt.io/v1beta1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// The kinds' GroupVersionKinds.
var (
	VirtualMachineSnapshotGroupVersionKind        = SchemeGroupVersion.WithKind("VirtualMachineSnapshot")
	VirtualMachineSnapshotContentGroupVersionKind = SchemeGroupVersion.WithKind("VirtualMachineSnapshotContent")
	VirtualMachineRestoreGroupVersionKind         = SchemeGroupVersion.WithKind("VirtualMachineRestore")
)

// Resource returns the GroupResource of a resource of this group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&VirtualMachineSnapshot{}, &VirtualMachineSnapshotList{},
		&VirtualMachineSnapshotContent{}, &VirtualMachineSnapshotContentList{},
		&VirtualMachineRestore{}, &VirtualMachineRestoreList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
