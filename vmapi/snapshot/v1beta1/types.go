package v1beta1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Defaults KubeVirt gives snapshots and restores.
const (
	// DefaultFailureDeadline is how long a snapshot may take without
	// spec.failureDeadline.
	DefaultFailureDeadline = 5 * time.Minute
	// DefaultGracePeriod is how long a restore with the WaitGracePeriod
	// policy waits for its target to be ready.
	DefaultGracePeriod = 5 * time.Minute
)

// VirtualMachineSnapshot records a VirtualMachine.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachinesnapshots,singular=virtualmachinesnapshot,scope=Namespaced,shortName=vmsnapshot;vmsnapshots,categories=all
// +kubebuilder:printcolumn:name="SourceKind",type=string,JSONPath=".spec.source.kind"
// +kubebuilder:printcolumn:name="SourceName",type=string,JSONPath=".spec.source.name"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="ReadyToUse",type=boolean,JSONPath=".status.readyToUse"
// +kubebuilder:printcolumn:name="CreationTime",type=date,JSONPath=".status.creationTime"
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=".status.error.message"
type VirtualMachineSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec names the VM; it cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable after creation"
	Spec VirtualMachineSnapshotSpec `json:"spec"`
	// Status is the snapshot's progress.
	// +optional
	Status *VirtualMachineSnapshotStatus `json:"status,omitempty"`
}

// DeletionPolicy says what happens to the content when its snapshot is
// deleted.
type DeletionPolicy string

// The deletion policies.
const (
	// VirtualMachineSnapshotContentDelete deletes the content with the
	// snapshot (the default).
	VirtualMachineSnapshotContentDelete DeletionPolicy = "Delete"
	// VirtualMachineSnapshotContentRetain keeps the content.
	VirtualMachineSnapshotContentRetain DeletionPolicy = "Retain"
)

// VirtualMachineSnapshotSpec is what to snapshot.
type VirtualMachineSnapshotSpec struct {
	// Source is the VirtualMachine (apiGroup kubevirt.io).
	// +kubebuilder:validation:XValidation:rule="self.name != ''",message="spec.source.name must not be empty"
	// +kubebuilder:validation:XValidation:rule="has(self.apiGroup)",message="spec.source.apiGroup: missing apiGroup"
	// +kubebuilder:validation:XValidation:rule="!has(self.apiGroup) || self.apiGroup == 'kubevirt.io'",message="spec.source.apiGroup: invalid apiGroup"
	// +kubebuilder:validation:XValidation:rule="self.kind == 'VirtualMachine'",message="spec.source.kind: invalid kind"
	Source corev1.TypedLocalObjectReference `json:"source"`
	// DeletionPolicy is Delete (default) or Retain.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Retain
	DeletionPolicy *DeletionPolicy `json:"deletionPolicy,omitempty"`
	// FailureDeadline is how long the snapshot may take before it fails
	// (DefaultFailureDeadline when unset; 0: no deadline).
	// +optional
	FailureDeadline *metav1.Duration `json:"failureDeadline,omitempty"`
}

// Indication is the state of the VM when it was snapshotted.
type Indication string

// The indications.
const (
	VMSnapshotOnlineSnapshotIndication Indication = "Online"
	VMSnapshotNoGuestAgentIndication   Indication = "NoGuestAgent"
	VMSnapshotGuestAgentIndication     Indication = "GuestAgent"
	VMSnapshotQuiesceTimeoutIndication Indication = "QuiesceTimeout"
	VMSnapshotPausedIndication         Indication = "Paused"
)

// SourceIndication is an indication and what it means.
type SourceIndication struct {
	// Indication is the indication.
	Indication Indication `json:"indication"`
	// Message describes it.
	Message string `json:"message"`
}

// VirtualMachineSnapshotPhase is the phase of a snapshot.
type VirtualMachineSnapshotPhase string

// The snapshot phases.
const (
	PhaseUnset VirtualMachineSnapshotPhase = ""
	InProgress VirtualMachineSnapshotPhase = "InProgress"
	Succeeded  VirtualMachineSnapshotPhase = "Succeeded"
	Failed     VirtualMachineSnapshotPhase = "Failed"
	Deleting   VirtualMachineSnapshotPhase = "Deleting"
	Unknown    VirtualMachineSnapshotPhase = "Unknown"
)

// VirtualMachineSnapshotStatus is the observed state of a snapshot.
type VirtualMachineSnapshotStatus struct {
	// SourceUID is the snapshotted VM's UID.
	// +optional
	SourceUID *types.UID `json:"sourceUID,omitempty"`
	// VirtualMachineSnapshotContentName names the content.
	// +optional
	VirtualMachineSnapshotContentName *string `json:"virtualMachineSnapshotContentName,omitempty"`
	// CreationTime is when the snapshot was taken.
	// +optional
	// +nullable
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// Phase is InProgress, Succeeded, Failed, Deleting or Unknown.
	// +optional
	Phase VirtualMachineSnapshotPhase `json:"phase,omitempty"`
	// ReadyToUse: a restore can use the snapshot.
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// Error is the last error.
	// +optional
	Error *Error `json:"error,omitempty"`
	// Conditions are Progressing, Ready and Failure.
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`
	// Indications (deprecated for SourceIndications).
	// +optional
	// +listType=set
	Indications []Indication `json:"indications,omitempty"`
	// SourceIndications say how the VM was when snapshotted.
	// +optional
	// +listType=atomic
	SourceIndications []SourceIndication `json:"sourceIndications,omitempty"`
	// SnapshotVolumes are the volumes included in and excluded from the
	// snapshot.
	// +optional
	SnapshotVolumes *SnapshotVolumesLists `json:"snapshotVolumes,omitempty"`
}

// SnapshotVolumesLists are the volumes a snapshot included and excluded.
type SnapshotVolumesLists struct {
	// IncludedVolumes were snapshotted.
	// +optional
	// +listType=set
	IncludedVolumes []string `json:"includedVolumes,omitempty"`
	// ExcludedVolumes could not be (vm.status.volumeSnapshotStatuses says
	// why).
	// +optional
	// +listType=set
	ExcludedVolumes []string `json:"excludedVolumes,omitempty"`
}

// Error is the last error of a snapshot or restore.
type Error struct {
	// Time is when it happened.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Message says what it was.
	// +optional
	Message *string `json:"message,omitempty"`
}

// ConditionType is the type of a snapshot or restore condition.
type ConditionType string

// The condition types.
const (
	ConditionReady       ConditionType = "Ready"
	ConditionProgressing ConditionType = "Progressing"
	ConditionFailure     ConditionType = "Failure"
)

// Condition is one snapshot or restore condition.
type Condition struct {
	// Type is Ready, Progressing or Failure.
	Type ConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastProbeTime is when it was last checked.
	// +optional
	// +nullable
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a short word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says more.
	// +optional
	Message string `json:"message,omitempty"`
}

// VirtualMachineSnapshotList is a list of snapshots.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	// +listType=atomic
	Items []VirtualMachineSnapshot `json:"items"`
}

// VirtualMachineSnapshotContent holds what a snapshot recorded.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachinesnapshotcontents,singular=virtualmachinesnapshotcontent,scope=Namespaced,shortName=vmsnapshotcontent;vmsnapshotcontents,categories=all
// +kubebuilder:printcolumn:name="ReadyToUse",type=boolean,JSONPath=".status.readyToUse"
// +kubebuilder:printcolumn:name="CreationTime",type=date,JSONPath=".status.creationTime"
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=".status.error.message"
type VirtualMachineSnapshotContent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the recorded VM and its volume backups.
	Spec VirtualMachineSnapshotContentSpec `json:"spec"`
	// Status says whether it is ready.
	// +optional
	Status *VirtualMachineSnapshotContentStatus `json:"status,omitempty"`
}

// VirtualMachineSnapshotContentSpec is what a snapshot recorded.
type VirtualMachineSnapshotContentSpec struct {
	// VirtualMachineSnapshotName names its snapshot.
	// +optional
	VirtualMachineSnapshotName *string `json:"virtualMachineSnapshotName,omitempty"`
	// Source is the VM as it was.
	Source SourceSpec `json:"source"`
	// VolumeBackups are the snapshotted claims.
	// +optional
	// +listType=atomic
	VolumeBackups []VolumeBackup `json:"volumeBackups,omitempty"`
}

// VirtualMachine is a VM as a snapshot recorded it.
type VirtualMachine struct {
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the VM's spec.
	Spec v1.VirtualMachineSpec `json:"spec,omitempty"`
	// Status is the VM's status then.
	Status v1.VirtualMachineStatus `json:"status,omitempty"`
}

// SourceSpec is the recorded source.
type SourceSpec struct {
	// VirtualMachine is the recorded VM.
	// +optional
	VirtualMachine *VirtualMachine `json:"virtualMachine,omitempty"`
}

// PersistentVolumeClaim is a claim as a snapshot recorded it.
type PersistentVolumeClaim struct {
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the claim's spec.
	// +optional
	Spec corev1.PersistentVolumeClaimSpec `json:"spec,omitempty"`
}

// VolumeBackup is a snapshotted claim.
type VolumeBackup struct {
	// VolumeName is the VM's volume.
	VolumeName string `json:"volumeName"`
	// PersistentVolumeClaim is the claim.
	PersistentVolumeClaim PersistentVolumeClaim `json:"persistentVolumeClaim"`
	// VolumeSnapshotName names its CSI VolumeSnapshot.
	// +optional
	VolumeSnapshotName *string `json:"volumeSnapshotName,omitempty"`
}

// VirtualMachineSnapshotContentStatus is whether a content is ready.
type VirtualMachineSnapshotContentStatus struct {
	// CreationTime is when it was recorded.
	// +optional
	// +nullable
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// ReadyToUse: a restore can use it.
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// Error is the last error.
	// +optional
	Error *Error `json:"error,omitempty"`
	// VolumeSnapshotStatus are the CSI VolumeSnapshots' states.
	// +optional
	// +listType=atomic
	VolumeSnapshotStatus []VolumeSnapshotStatus `json:"volumeSnapshotStatus,omitempty"`
}

// VirtualMachineSnapshotContentList is a list of contents.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineSnapshotContentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	// +listType=atomic
	Items []VirtualMachineSnapshotContent `json:"items"`
}

// VolumeSnapshotStatus is the state of a CSI VolumeSnapshot.
type VolumeSnapshotStatus struct {
	// VolumeSnapshotName names it.
	VolumeSnapshotName string `json:"volumeSnapshotName"`
	// CreationTime is when it was taken.
	// +optional
	// +nullable
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// ReadyToUse: it can be restored.
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// Error is its last error.
	// +optional
	Error *Error `json:"error,omitempty"`
}

// VirtualMachineRestore puts a snapshot back onto a VM.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachinerestores,singular=virtualmachinerestore,scope=Namespaced,shortName=vmrestore;vmrestores,categories=all
// +kubebuilder:printcolumn:name="TargetKind",type=string,JSONPath=".spec.target.kind"
// +kubebuilder:printcolumn:name="TargetName",type=string,JSONPath=".spec.target.name"
// +kubebuilder:printcolumn:name="Complete",type=boolean,JSONPath=".status.complete"
// +kubebuilder:printcolumn:name="RestoreTime",type=date,JSONPath=".status.restoreTime"
type VirtualMachineRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec names the snapshot and the target; it cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable after creation"
	Spec VirtualMachineRestoreSpec `json:"spec"`
	// Status is the restore's progress.
	// +optional
	Status *VirtualMachineRestoreStatus `json:"status,omitempty"`
}

// TargetReadinessPolicy says what a restore does while its target runs.
type TargetReadinessPolicy string

// The target readiness policies.
const (
	// VirtualMachineRestoreStopTarget stops the target and restores.
	VirtualMachineRestoreStopTarget TargetReadinessPolicy = "StopTarget"
	// VirtualMachineRestoreWaitGracePeriodAndFail waits DefaultGracePeriod
	// for the target to stop, then fails (the default).
	VirtualMachineRestoreWaitGracePeriodAndFail TargetReadinessPolicy = "WaitGracePeriod"
	// VirtualMachineRestoreFailImmediate fails at once when the target
	// runs.
	VirtualMachineRestoreFailImmediate TargetReadinessPolicy = "FailImmediate"
	// VirtualMachineRestoreWaitEventually waits for the target to stop,
	// without a deadline.
	VirtualMachineRestoreWaitEventually TargetReadinessPolicy = "WaitEventually"
)

// VolumeRestorePolicy says how snapshotted claims are restored.
type VolumeRestorePolicy string

// The volume restore policies.
const (
	VolumeRestorePolicyRandomizeNames   VolumeRestorePolicy = "RandomizeNames"
	VolumeRestorePolicyInPlace          VolumeRestorePolicy = "InPlace"
	VolumeRestorePolicyPrefixTargetName VolumeRestorePolicy = "PrefixTargetName"
)

// VolumeOwnershipPolicy says what owns restored claims.
type VolumeOwnershipPolicy string

// The volume ownership policies.
const (
	VolumeOwnershipPolicyVm   VolumeOwnershipPolicy = "Vm"
	VolumeOwnershipPolicyNone VolumeOwnershipPolicy = "None"
)

// VirtualMachineRestoreSpec is what to restore where.
type VirtualMachineRestoreSpec struct {
	// Target is the VirtualMachine (apiGroup kubevirt.io) to restore;
	// created from the snapshot when it does not exist.
	// +kubebuilder:validation:XValidation:rule="self.name != ''",message="spec.target.name must not be empty"
	// +kubebuilder:validation:XValidation:rule="has(self.apiGroup)",message="spec.target.apiGroup: missing apiGroup"
	// +kubebuilder:validation:XValidation:rule="!has(self.apiGroup) || self.apiGroup == 'kubevirt.io'",message="spec.target.apiGroup: invalid apiGroup"
	// +kubebuilder:validation:XValidation:rule="self.kind == 'VirtualMachine'",message="spec.target.kind: invalid kind"
	Target corev1.TypedLocalObjectReference `json:"target"`
	// VirtualMachineSnapshotName names the snapshot.
	// +kubebuilder:validation:MinLength=1
	VirtualMachineSnapshotName string `json:"virtualMachineSnapshotName"`
	// TargetReadinessPolicy is what to do while the target runs.
	// +optional
	// +kubebuilder:validation:Enum=StopTarget;WaitGracePeriod;FailImmediate;WaitEventually
	TargetReadinessPolicy *TargetReadinessPolicy `json:"targetReadinessPolicy,omitempty"`
	// VolumeRestorePolicy is how claims are restored.
	// +optional
	// +kubebuilder:validation:Enum=RandomizeNames;InPlace;PrefixTargetName
	VolumeRestorePolicy *VolumeRestorePolicy `json:"volumeRestorePolicy,omitempty"`
	// VolumeOwnershipPolicy is what owns restored claims.
	// +optional
	// +kubebuilder:validation:Enum=Vm;None
	VolumeOwnershipPolicy *VolumeOwnershipPolicy `json:"volumeOwnershipPolicy,omitempty"`
	// VolumeRestoreOverrides change restored claims (name, labels,
	// annotations).
	// +optional
	// +listType=atomic
	VolumeRestoreOverrides []VolumeRestoreOverride `json:"volumeRestoreOverrides,omitempty"`
	// Patches are JSON patches applied to a target created from the
	// snapshot, e.g. {"op": "replace", "path": "/metadata/name", "value": "new-vm"}.
	// +optional
	// +listType=atomic
	Patches []string `json:"patches,omitempty"`
}

// VirtualMachineRestoreStatus is the observed state of a restore.
type VirtualMachineRestoreStatus struct {
	// Restores are the restored claims.
	// +optional
	// +listType=atomic
	Restores []VolumeRestore `json:"restores,omitempty"`
	// RestoreTime is when the restore completed.
	// +optional
	// +nullable
	RestoreTime *metav1.Time `json:"restoreTime,omitempty"`
	// DeletedDataVolumes are the DataVolumes the restore deleted.
	// +optional
	// +listType=set
	DeletedDataVolumes []string `json:"deletedDataVolumes,omitempty"`
	// Complete: the target has the snapshot's state.
	// +optional
	Complete *bool `json:"complete,omitempty"`
	// Conditions are Progressing, Ready and Failure.
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`
}

// VolumeRestore is a restored claim.
type VolumeRestore struct {
	// VolumeName is the VM's volume.
	VolumeName string `json:"volumeName"`
	// PersistentVolumeClaimName is the restored claim.
	PersistentVolumeClaimName string `json:"persistentVolumeClaim"`
	// VolumeSnapshotName is the VolumeSnapshot it came from.
	VolumeSnapshotName string `json:"volumeSnapshotName"`
	// DataVolumeName is its DataVolume, if any.
	// +optional
	DataVolumeName *string `json:"dataVolumeName,omitempty"`
}

// VolumeRestoreOverride changes a restored claim.
type VolumeRestoreOverride struct {
	// VolumeName is the VM's volume.
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
	// RestoreName is the restored claim's name.
	// +optional
	RestoreName string `json:"restoreName,omitempty"`
	// Labels added to the restored claim.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the restored claim.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// VirtualMachineRestoreList is a list of restores.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	// +listType=atomic
	Items []VirtualMachineRestore `json:"items"`
}
