package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of VirtualMachineExport.
const GroupName = "export.kubevirt.io"

// SchemeGroupVersion is export.kubevirt.io/v1beta1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// VirtualMachineExportGroupVersionKind is the kind's GroupVersionKind.
var VirtualMachineExportGroupVersionKind = SchemeGroupVersion.WithKind(VirtualMachineExportKind)

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
	scheme.AddKnownTypes(SchemeGroupVersion, &VirtualMachineExport{}, &VirtualMachineExportList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
