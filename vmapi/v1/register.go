package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "kubevirt.io"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Kinds of this API group, for owner references and error messages.
var (
	VirtualMachineGroupVersionKind                   = SchemeGroupVersion.WithKind("VirtualMachine")
	VirtualMachineInstanceGroupVersionKind           = SchemeGroupVersion.WithKind("VirtualMachineInstance")
	VirtualMachineInstanceReplicaSetGroupVersionKind = SchemeGroupVersion.WithKind("VirtualMachineInstanceReplicaSet")
	VirtualMachineInstanceMigrationGroupVersionKind  = SchemeGroupVersion.WithKind("VirtualMachineInstanceMigration")
	KubeVirtGroupVersionKind                         = SchemeGroupVersion.WithKind("KubeVirt")
	VirtualMachineInstancePresetGroupVersionKind     = SchemeGroupVersion.WithKind("VirtualMachineInstancePreset")
)

// Resource returns the group-qualified resource for an unqualified resource name.
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
		&VirtualMachine{}, &VirtualMachineList{},
		&VirtualMachineInstance{}, &VirtualMachineInstanceList{},
		&VirtualMachineInstanceReplicaSet{}, &VirtualMachineInstanceReplicaSetList{},
		&VirtualMachineInstanceMigration{}, &VirtualMachineInstanceMigrationList{},
		&KubeVirt{}, &KubeVirtList{},
		&VirtualMachineInstancePreset{}, &VirtualMachineInstancePresetList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
