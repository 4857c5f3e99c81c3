package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// VirtualMachineInstancePreset holds domain settings that virt-api's
// mutating webhook copies into every new VirtualMachineInstance of its
// namespace whose labels its selector matches, where the VMI leaves them
// unset (KubeVirt's presets; deprecated upstream in favour of instance
// types and preferences, and served deprecated here too).
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstancepresets,singular=virtualmachineinstancepreset,shortName=vmipreset;vmipresets,categories=all
// +kubebuilder:deprecatedversion:warning="kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."
type VirtualMachineInstancePreset struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the selector and the settings applied.
	Spec VirtualMachineInstancePresetSpec `json:"spec,omitempty"`
}

// VirtualMachineInstancePresetList is a list of presets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstancePresetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstancePreset `json:"items"`
}

// VirtualMachineInstancePresetSpec selects VMIs and holds the settings
// they get.
type VirtualMachineInstancePresetSpec struct {
	// Selector picks the VMIs, by label, in the preset's namespace.
	Selector metav1.LabelSelector `json:"selector"`
	// Domain holds the settings: of it, resources.requests, cpu,
	// firmware, clock, features, devices.watchdog and ioThreadsPolicy are
	// applied, as KubeVirt applied them.
	// +optional
	Domain *DomainSpec `json:"domain,omitempty"`
}
