package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstanceReplicaSet keeps a number of identical
// VirtualMachineInstances running.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:resource:path=virtualmachineinstancereplicasets,singular=virtualmachineinstancereplicaset,shortName=vmirs;vmirss,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Number of desired VirtualMachineInstances"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.replicas",description="Number of managed and not final or deleted VirtualMachineInstances"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas",description="Number of managed VirtualMachineInstances which are ready to receive traffic"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachineInstanceReplicaSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state of the replica set.
	Spec VirtualMachineInstanceReplicaSetSpec `json:"spec"`
	// Status is the observed state of the replica set.
	// +optional
	// +nullable
	Status VirtualMachineInstanceReplicaSetStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceReplicaSetList is a list of replica sets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstanceReplicaSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceReplicaSet `json:"items"`
}

// VirtualMachineInstanceReplicaSetSpec is the desired state of a replica set.
type VirtualMachineInstanceReplicaSetSpec struct {
	// Replicas is the number of instances to keep; 1 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector selects the instances the replica set owns; it must match
	// the template's labels.
	Selector *metav1.LabelSelector `json:"selector"`
	// Template is the instance the replica set creates.
	Template *VirtualMachineInstanceTemplateSpec `json:"template"`
	// Paused stops the replica set from creating or deleting instances.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// VirtualMachineInstanceReplicaSetStatus is the observed state of a replica set.
type VirtualMachineInstanceReplicaSetStatus struct {
	// Replicas is the number of owned instances that are not final.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of owned instances that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Conditions of the replica set.
	// +optional
	Conditions []VirtualMachineInstanceReplicaSetCondition `json:"conditions,omitempty"`
	// LabelSelector is the selector in string form, for the scale subresource.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// VirtualMachineInstanceReplicaSetConditionType is the type of a replica set condition.
type VirtualMachineInstanceReplicaSetConditionType string

// Replica set condition types.
const (
	// VirtualMachineInstanceReplicaSetReplicaFailure: creating or deleting an instance failed.
	VirtualMachineInstanceReplicaSetReplicaFailure VirtualMachineInstanceReplicaSetConditionType = "ReplicaFailure"
	// VirtualMachineInstanceReplicaSetReplicaPaused: the replica set is paused.
	VirtualMachineInstanceReplicaSetReplicaPaused VirtualMachineInstanceReplicaSetConditionType = "ReplicaPaused"
)

// VirtualMachineInstanceReplicaSetCondition is one condition of a replica set.
type VirtualMachineInstanceReplicaSetCondition struct {
	// Type of the condition.
	Type VirtualMachineInstanceReplicaSetConditionType `json:"type"`
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
