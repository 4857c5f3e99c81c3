package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachine is a stateful virtual machine: it starts and stops
// VirtualMachineInstances from its template according to its run strategy.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachines,singular=virtualmachine,shortName=vm;vms,categories=all
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.printableStatus"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state of the VM.
	Spec VirtualMachineSpec `json:"spec"`
	// Status is the observed state of the VM.
	// +optional
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachine `json:"items"`
}

// VirtualMachineRunStrategy says when a VM's instance should run.
//
// +kubebuilder:validation:Enum=Always;RerunOnFailure;Manual;Halted;Once;WaitAsReceiver
type VirtualMachineRunStrategy string

// Run strategies.
const (
	// RunStrategyUnknown is returned alongside an error.
	RunStrategyUnknown VirtualMachineRunStrategy = "Unknown"
	// RunStrategyAlways keeps an instance running, restarting it whenever it stops.
	RunStrategyAlways VirtualMachineRunStrategy = "Always"
	// RunStrategyRerunOnFailure restarts the instance only when it fails.
	RunStrategyRerunOnFailure VirtualMachineRunStrategy = "RerunOnFailure"
	// RunStrategyManual starts and stops only on explicit requests.
	RunStrategyManual VirtualMachineRunStrategy = "Manual"
	// RunStrategyHalted keeps the VM stopped.
	RunStrategyHalted VirtualMachineRunStrategy = "Halted"
	// RunStrategyOnce runs the instance once, to completion.
	RunStrategyOnce VirtualMachineRunStrategy = "Once"
	// RunStrategyWaitAsReceiver waits for a cross-cluster migration source.
	RunStrategyWaitAsReceiver VirtualMachineRunStrategy = "WaitAsReceiver"
)

// VirtualMachineSpec is the desired state of a VM.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.running) && has(self.runStrategy))",message="spec.running and spec.runStrategy are mutually exclusive: set only spec.runStrategy",reason=FieldValueForbidden
type VirtualMachineSpec struct {
	// Running true keeps an instance running, false keeps the VM stopped.
	// Deprecated in favour of RunStrategy; mutually exclusive with it.
	// +optional
	Running *bool `json:"running,omitempty"`
	// RunStrategy says when an instance should run.
	// +optional
	RunStrategy *VirtualMachineRunStrategy `json:"runStrategy,omitempty"`
	// Instancetype names the instance type (instancetype.kubevirt.io) whose
	// CPU, memory and devices fill the template's instance.
	// +optional
	Instancetype *InstancetypeMatcher `json:"instancetype,omitempty"`
	// Preference names the preference (instancetype.kubevirt.io) whose
	// preferred values fill what the template leaves unset.
	// +optional
	Preference *PreferenceMatcher `json:"preference,omitempty"`
	// Template is the VirtualMachineInstance the VM starts.
	Template *VirtualMachineInstanceTemplateSpec `json:"template"`
	// DataVolumeTemplates are CDI DataVolumes created with the VM.
	// +optional
	DataVolumeTemplates []DataVolumeTemplateSpec `json:"dataVolumeTemplates,omitempty"`
	// UpdateVolumesStrategy is how a change of the template's volumes
	// reaches a running VM: Replacement (at the next restart) or Migration
	// (a storage migration); Replacement when unset.
	// +optional
	// +kubebuilder:validation:Enum=Replacement;Migration
	UpdateVolumesStrategy *UpdateVolumesStrategy `json:"updateVolumesStrategy,omitempty"`
}

// VirtualMachineInstanceTemplateSpec is the template of a VMI.
type VirtualMachineInstanceTemplateSpec struct {
	// ObjectMeta of the VMIs created from the template (labels, annotations).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec of the VMIs created from the template.
	// +optional
	Spec VirtualMachineInstanceSpec `json:"spec,omitempty"`
}

// DataVolumeTemplateSpec is a CDI DataVolume created along with a VM. vmkit
// stores it unchanged; CDI, where installed, acts on it.
type DataVolumeTemplateSpec struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta of the DataVolume.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the cdi.kubevirt.io/v1beta1 DataVolumeSpec, kept as-is.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Spec runtime.RawExtension `json:"spec"`
	// Status is always empty; it is in the schema because KubeVirt's is.
	// +optional
	Status *DataVolumeTemplateDummyStatus `json:"status,omitempty"`
}

// VirtualMachinePrintableStatus is the one-word state shown by kubectl get vm.
type VirtualMachinePrintableStatus string

// Printable statuses.
const (
	VirtualMachineStatusStopped                 VirtualMachinePrintableStatus = "Stopped"
	VirtualMachineStatusProvisioning            VirtualMachinePrintableStatus = "Provisioning"
	VirtualMachineStatusStarting                VirtualMachinePrintableStatus = "Starting"
	VirtualMachineStatusRunning                 VirtualMachinePrintableStatus = "Running"
	VirtualMachineStatusPaused                  VirtualMachinePrintableStatus = "Paused"
	VirtualMachineStatusStopping                VirtualMachinePrintableStatus = "Stopping"
	VirtualMachineStatusTerminating             VirtualMachinePrintableStatus = "Terminating"
	VirtualMachineStatusCrashLoopBackOff        VirtualMachinePrintableStatus = "CrashLoopBackOff"
	VirtualMachineStatusMigrating               VirtualMachinePrintableStatus = "Migrating"
	VirtualMachineStatusUnknown                 VirtualMachinePrintableStatus = "Unknown"
	VirtualMachineStatusUnschedulable           VirtualMachinePrintableStatus = "ErrorUnschedulable"
	VirtualMachineStatusErrImagePull            VirtualMachinePrintableStatus = "ErrImagePull"
	VirtualMachineStatusImagePullBackOff        VirtualMachinePrintableStatus = "ImagePullBackOff"
	VirtualMachineStatusPvcNotFound             VirtualMachinePrintableStatus = "ErrorPvcNotFound"
	VirtualMachineStatusDataVolumeError         VirtualMachinePrintableStatus = "DataVolumeError"
	VirtualMachineStatusWaitingForVolumeBinding VirtualMachinePrintableStatus = "WaitingForVolumeBinding"
)

// VirtualMachineStatus is the observed state of a VM.
type VirtualMachineStatus struct {
	// Created: an instance of the VM exists.
	// +optional
	Created bool `json:"created,omitempty"`
	// Ready: the instance exists and is ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// PrintableStatus is the one-word state shown by kubectl get vm.
	// +optional
	PrintableStatus VirtualMachinePrintableStatus `json:"printableStatus,omitempty"`
	// Conditions of the VM, partly mirrored from its instance.
	// +optional
	Conditions []VirtualMachineCondition `json:"conditions,omitempty"`
	// StateChangeRequests are pending start and stop requests.
	// +optional
	StateChangeRequests []VirtualMachineStateChangeRequest `json:"stateChangeRequests,omitempty"`
	// StartFailure tracks consecutive failed starts for crash-loop back-off.
	// +optional
	// +nullable
	StartFailure *VirtualMachineStartFailure `json:"startFailure,omitempty"`
	// ObservedGeneration is the VM generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DesiredGeneration is the VM generation the running instance was made from.
	// +optional
	DesiredGeneration int64 `json:"desiredGeneration,omitempty"`
	// RunStrategy is the run strategy in effect.
	// +optional
	RunStrategy VirtualMachineRunStrategy `json:"runStrategy,omitempty"`
	// InstancetypeRef is the instance type the VM uses and the
	// ControllerRevision holding the copy of it the VM's instances are made from.
	// +optional
	// +nullable
	InstancetypeRef *InstancetypeStatusRef `json:"instancetypeRef,omitempty"`
	// PreferenceRef is the preference the VM uses and the
	// ControllerRevision holding the copy of it the VM's instances are made from.
	// +optional
	// +nullable
	PreferenceRef *InstancetypeStatusRef `json:"preferenceRef,omitempty"`
	// SnapshotInProgress names the snapshot being taken.
	// +optional
	SnapshotInProgress *string `json:"snapshotInProgress,omitempty"`
	// RestoreInProgress names the restore being done.
	// +optional
	RestoreInProgress *string `json:"restoreInProgress,omitempty"`
	// VolumeRequests are pending volume hotplugs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	VolumeRequests []VirtualMachineVolumeRequest `json:"volumeRequests,omitempty"`
	// VolumeSnapshotStatuses say which volumes can be snapshotted.
	// +optional
	VolumeSnapshotStatuses []VolumeSnapshotStatus `json:"volumeSnapshotStatuses,omitempty"`
	// MemoryDumpRequest is the memory dump asked for.
	// +optional
	MemoryDumpRequest *VirtualMachineMemoryDumpRequest `json:"memoryDumpRequest,omitempty"`
	// VolumeUpdateState is the state of a change of the VM's volumes.
	// +optional
	VolumeUpdateState *VolumeUpdateState `json:"volumeUpdateState,omitempty"`
	// ChangedBlockTracking is the state of changed-block tracking.
	// +optional
	ChangedBlockTracking *ChangedBlockTrackingStatus `json:"changedBlockTracking,omitempty"`
}

// InferFromVolumeFailurePolicy says what happens when an instance type or
// preference cannot be inferred from a volume.
//
// +kubebuilder:validation:Enum=Reject;Ignore
type InferFromVolumeFailurePolicy string

// Inference failure policies.
const (
	// RejectInferFromVolumeFailure (the default) reports the failure and
	// does not start the VM.
	RejectInferFromVolumeFailure InferFromVolumeFailurePolicy = "Reject"
	// IgnoreInferFromVolumeFailure goes on without the instance type or
	// preference.
	IgnoreInferFromVolumeFailure InferFromVolumeFailurePolicy = "Ignore"
)

// InstancetypeMatcher names the instance type of a VM.
//
// The rules are the checks of KubeVirt's VM admission webhook, with its messages.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.inferFromVolume)",message="Either Name or InferFromVolume should be provided within the InstancetypeMatcher",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolume) || !has(self.name)",message="Name already set, should be cleared before setting inferFromVolume",fieldPath=".name"
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolume) || !has(self.kind)",message="Kind already set, should be cleared before setting inferFromVolume",fieldPath=".kind"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.revisionName) || (has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)) || !has(self.revisionName) || self.revisionName != oldSelf.revisionName",message="the Matcher Name has been updated without updating the RevisionName",fieldPath=".revisionName"
// +kubebuilder:validation:XValidation:rule="!has(self.kind) || self.kind.lowerAscii() in ['virtualmachineinstancetype', 'virtualmachineinstancetypes', 'virtualmachineclusterinstancetype', 'virtualmachineclusterinstancetypes']",messageExpression="'got unexpected kind in InstancetypeMatcher: ' + self.kind",fieldPath=".kind"
type InstancetypeMatcher struct {
	// Name of the VirtualMachineInstancetype or VirtualMachineClusterInstancetype.
	// +optional
	Name string `json:"name,omitempty"`
	// Kind is VirtualMachineInstancetype (in the VM's namespace) or
	// VirtualMachineClusterInstancetype (the default).
	// +optional
	Kind string `json:"kind,omitempty"`
	// RevisionName names a ControllerRevision holding the copy of the
	// instance type to use; the controller records the one it stores in
	// status.instancetypeRef.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// InferFromVolume names a volume whose PersistentVolumeClaim or
	// DataVolume carries the instancetype.kubevirt.io/default-instancetype
	// label naming the instance type.
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is Reject (the default) or Ignore.
	// +optional
	InferFromVolumeFailurePolicy *InferFromVolumeFailurePolicy `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// PreferenceMatcher names the preference of a VM.
//
// The rules are the checks of KubeVirt's VM admission webhook, with its messages.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.inferFromVolume)",message="Either Name or InferFromVolume should be provided within the PreferenceMatcher",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolume) || !has(self.name)",message="Name already set, should be cleared before setting inferFromVolume",fieldPath=".name"
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolume) || !has(self.kind)",message="Kind already set, should be cleared before setting inferFromVolume",fieldPath=".kind"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.revisionName) || (has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)) || !has(self.revisionName) || self.revisionName != oldSelf.revisionName",message="the Matcher Name has been updated without updating the RevisionName",fieldPath=".revisionName"
// +kubebuilder:validation:XValidation:rule="!has(self.kind) || self.kind.lowerAscii() in ['virtualmachinepreference', 'virtualmachinepreferences', 'virtualmachineclusterpreference', 'virtualmachineclusterpreferences']",messageExpression="'got unexpected kind in PreferenceMatcher: ' + self.kind",fieldPath=".kind"
type PreferenceMatcher struct {
	// Name of the VirtualMachinePreference or VirtualMachineClusterPreference.
	// +optional
	Name string `json:"name,omitempty"`
	// Kind is VirtualMachinePreference (in the VM's namespace) or
	// VirtualMachineClusterPreference (the default).
	// +optional
	Kind string `json:"kind,omitempty"`
	// RevisionName names a ControllerRevision holding the copy of the
	// preference to use; the controller records the one it stores in
	// status.preferenceRef.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// InferFromVolume names a volume whose PersistentVolumeClaim or
	// DataVolume carries the instancetype.kubevirt.io/default-preference
	// label naming the preference.
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is Reject (the default) or Ignore.
	// +optional
	InferFromVolumeFailurePolicy *InferFromVolumeFailurePolicy `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// InstancetypeStatusRef is the instance type or preference a VM uses, as
// the VM controller resolved it.
type InstancetypeStatusRef struct {
	// Name of the instance type or preference.
	// +optional
	Name string `json:"name,omitempty"`
	// Kind of the instance type or preference.
	// +optional
	Kind string `json:"kind,omitempty"`
	// ControllerRevisionRef names the ControllerRevision holding the copy
	// the VM's instances are made from.
	// +optional
	ControllerRevisionRef *ControllerRevisionRef `json:"controllerRevisionRef,omitempty"`
	// InferFromVolume is the volume the name was inferred from.
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is the matcher's policy.
	// +optional
	InferFromVolumeFailurePolicy *InferFromVolumeFailurePolicy `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// ControllerRevisionRef names a ControllerRevision.
type ControllerRevisionRef struct {
	// Name of the ControllerRevision.
	// +optional
	Name string `json:"name,omitempty"`
}

// VirtualMachineConditionType is the type of a VM condition.
type VirtualMachineConditionType string

// VM condition types.
const (
	// VirtualMachineFailure: the VM could not create or manage its instance.
	VirtualMachineFailure VirtualMachineConditionType = "Failure"
	// VirtualMachineReady mirrors the instance's Ready condition.
	VirtualMachineReady VirtualMachineConditionType = "Ready"
	// VirtualMachinePaused mirrors the instance's Paused condition.
	VirtualMachinePaused VirtualMachineConditionType = "Paused"
	// VirtualMachineRestartRequired: the spec changed in a way that needs a restart.
	VirtualMachineRestartRequired VirtualMachineConditionType = "RestartRequired"
)

// VirtualMachineCondition is one condition of a VM.
type VirtualMachineCondition struct {
	// Type of the condition.
	Type VirtualMachineConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastProbeTime is when the condition was last checked.
	// +optional
	// +nullable
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a short CamelCase reason.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation.
	// +optional
	Message string `json:"message,omitempty"`
}

// StateChangeRequestAction is Start or Stop.
//
// +kubebuilder:validation:Enum=Start;Stop
type StateChangeRequestAction string

// State change actions.
const (
	StartRequest StateChangeRequestAction = "Start"
	StopRequest  StateChangeRequestAction = "Stop"
)

// VirtualMachineStateChangeRequest asks the VM controller to start or stop
// the VM's instance.
type VirtualMachineStateChangeRequest struct {
	// Action is Start or Stop.
	Action StateChangeRequestAction `json:"action"`
	// Data carries action parameters.
	// +optional
	Data map[string]string `json:"data,omitempty"`
	// UID of the instance a Stop applies to.
	// +optional
	UID *types.UID `json:"uid,omitempty"`
}

// VirtualMachineStartFailure tracks consecutive failed starts.
type VirtualMachineStartFailure struct {
	// ConsecutiveFailCount is the number of failed starts in a row.
	// +optional
	ConsecutiveFailCount int `json:"consecutiveFailCount,omitempty"`
	// LastFailedVMIUID is the UID of the last instance that failed.
	// +optional
	LastFailedVMIUID types.UID `json:"lastFailedVMIUID,omitempty"`
	// RetryAfterTimestamp is when the next start may happen.
	// +optional
	RetryAfterTimestamp *metav1.Time `json:"retryAfterTimestamp,omitempty"`
}
