package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstanceMigration moves a running VirtualMachineInstance to
// another node.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachineinstancemigrations,singular=virtualmachineinstancemigration,shortName=vmim;vmims,categories=all
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase",description="The current phase of the migration"
// +kubebuilder:printcolumn:name="VMI",type=string,JSONPath=".spec.vmiName",description="The name of the VMI to migrate"
type VirtualMachineInstanceMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec names the instance to migrate.
	Spec VirtualMachineInstanceMigrationSpec `json:"spec"`
	// Status is the progress of the migration.
	// +optional
	Status VirtualMachineInstanceMigrationStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceMigrationList is a list of migrations.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstanceMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceMigration `json:"items"`
}

// VirtualMachineInstanceMigrationSpec names the instance to migrate.
type VirtualMachineInstanceMigrationSpec struct {
	// VMIName is the VirtualMachineInstance in the migration's namespace.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.vmiName is immutable"
	VMIName string `json:"vmiName,omitempty"`
	// AddedNodeSelector is added to the target pod's node selector; it
	// cannot override the VMI's own.
	// +optional
	AddedNodeSelector map[string]string `json:"addedNodeSelector,omitempty"`
	// Priority orders migrations waiting for a slot: system-critical,
	// user-triggered or system-maintenance.
	// +optional
	Priority *MigrationPriority `json:"priority,omitempty"`
	// SendTo makes this the sending half of a migration to another
	// cluster.
	// +optional
	SendTo *VirtualMachineInstanceMigrationSource `json:"sendTo,omitempty"`
	// Receive makes this the receiving half of a migration from another
	// cluster.
	// +optional
	Receive *VirtualMachineInstanceMigrationTarget `json:"receive,omitempty"`
}

// VirtualMachineInstanceMigrationPhase is a phase of a migration.
//
// +kubebuilder:validation:Enum="";Pending;Scheduling;Scheduled;PreparingTarget;TargetReady;Running;Succeeded;Failed
type VirtualMachineInstanceMigrationPhase string

// Migration phases.
const (
	MigrationPhaseUnset VirtualMachineInstanceMigrationPhase = ""
	// MigrationPending: accepted, waiting for its turn.
	MigrationPending VirtualMachineInstanceMigrationPhase = "Pending"
	// MigrationScheduling: the target pod is being scheduled.
	MigrationScheduling VirtualMachineInstanceMigrationPhase = "Scheduling"
	// MigrationScheduled: the target pod runs on a node.
	MigrationScheduled VirtualMachineInstanceMigrationPhase = "Scheduled"
	// MigrationPreparingTarget: the target node prepares to receive the domain.
	MigrationPreparingTarget VirtualMachineInstanceMigrationPhase = "PreparingTarget"
	// MigrationTargetReady: the target is ready to receive the domain.
	MigrationTargetReady VirtualMachineInstanceMigrationPhase = "TargetReady"
	// MigrationRunning: memory is being transferred.
	MigrationRunning VirtualMachineInstanceMigrationPhase = "Running"
	// MigrationSucceeded: the guest runs on the target. Final.
	MigrationSucceeded VirtualMachineInstanceMigrationPhase = "Succeeded"
	// MigrationFailed: the guest stays on the source. Final.
	MigrationFailed VirtualMachineInstanceMigrationPhase = "Failed"
)

// VirtualMachineInstanceMigrationStatus is the progress of a migration.
type VirtualMachineInstanceMigrationStatus struct {
	// Phase of the migration.
	// +optional
	Phase VirtualMachineInstanceMigrationPhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamps records when each phase was entered.
	// +optional
	PhaseTransitionTimestamps []VirtualMachineInstanceMigrationPhaseTransitionTimestamp `json:"phaseTransitionTimestamps,omitempty"`
	// Conditions of the migration.
	// +optional
	Conditions []VirtualMachineInstanceMigrationCondition `json:"conditions,omitempty"`
	// MigrationState is the detailed state, as on the VMI.
	// +optional
	MigrationState *VirtualMachineInstanceMigrationState `json:"migrationState,omitempty"`
	// SynchronizationAddresses of the synchronization controller for a
	// migration between clusters.
	// +optional
	// +listType=atomic
	SynchronizationAddresses []string `json:"synchronizationAddresses,omitempty"`
}

// VirtualMachineInstanceMigrationPhaseTransitionTimestamp records when a phase was entered.
type VirtualMachineInstanceMigrationPhaseTransitionTimestamp struct {
	// Phase entered.
	// +optional
	Phase VirtualMachineInstanceMigrationPhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamp is when it was entered.
	// +optional
	// +nullable
	PhaseTransitionTimestamp metav1.Time `json:"phaseTransitionTimestamp,omitempty"`
}

// VirtualMachineInstanceMigrationConditionType is the type of a migration condition.
type VirtualMachineInstanceMigrationConditionType string

// Migration condition types.
const (
	// VirtualMachineInstanceMigrationAbortRequested: someone asked to abort.
	VirtualMachineInstanceMigrationAbortRequested VirtualMachineInstanceMigrationConditionType = "migrationAbortRequested"
	// VirtualMachineInstanceMigrationRejectedByResourceQuota: the target pod exceeds a quota.
	VirtualMachineInstanceMigrationRejectedByResourceQuota VirtualMachineInstanceMigrationConditionType = "migrationRejectedByResourceQuota"
)

// VirtualMachineInstanceMigrationCondition is one condition of a migration.
type VirtualMachineInstanceMigrationCondition struct {
	// Type of the condition.
	Type VirtualMachineInstanceMigrationConditionType `json:"type"`
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
