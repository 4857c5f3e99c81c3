package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Names KubeVirt gives the pool kind and the finalizer its controller uses.
const (
	VirtualMachinePoolKind = "VirtualMachinePool"
	// VirtualMachinePoolControllerFinalizer is the finalizer KubeVirt's pool
	// controller puts on pools and their VMs for state preservation; vmkit
	// sets none and leaves it alone.
	VirtualMachinePoolControllerFinalizer = "pool.kubevirt.io/finalizer"
)

// VirtualMachinePool keeps a number of VirtualMachines made from one
// template, named <pool>-<index>.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:resource:path=virtualmachinepools,singular=virtualmachinepool,scope=Namespaced,shortName=vmpool;vmpools,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Number of desired VirtualMachines"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.replicas",description="Number of managed and not final or deleted VirtualMachines"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas",description="Number of managed VirtualMachines which are ready to receive traffic"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state of the pool.
	Spec VirtualMachinePoolSpec `json:"spec"`
	// Status is the observed state of the pool.
	// +optional
	Status VirtualMachinePoolStatus `json:"status,omitempty"`
}

// VirtualMachinePoolList is a list of VirtualMachinePools.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachinePool `json:"items"`
}

// VirtualMachineTemplateSpec is the VirtualMachine a pool creates.
type VirtualMachineTemplateSpec struct {
	// ObjectMeta of the VMs (labels, annotations); the labels must match the
	// pool's selector.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec of the VMs.
	// +optional
	Spec v1.VirtualMachineSpec `json:"spec,omitempty"`
}

// VirtualMachinePoolSpec is the desired state of a pool.
type VirtualMachinePoolSpec struct {
	// Replicas is the number of VMs to keep; 1 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector selects the VMs the pool owns; it must match the template's
	// labels.
	Selector *metav1.LabelSelector `json:"selector"`
	// VirtualMachineTemplate is the VM the pool creates.
	VirtualMachineTemplate *VirtualMachineTemplateSpec `json:"virtualMachineTemplate"`
	// Paused stops the pool from creating or deleting VMs.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// NameGeneration says which references of the template get the VM's
	// index appended, so each VM reads its own ConfigMaps and Secrets.
	// +optional
	NameGeneration *VirtualMachinePoolNameGeneration `json:"nameGeneration,omitempty"`
	// MaxUnavailable is how many VMs (a number or a percentage, default
	// 100%) may be unready at once during an automated update.
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// ScaleInStrategy says how VMs are removed when the pool shrinks.
	// +optional
	ScaleInStrategy *VirtualMachinePoolScaleInStrategy `json:"scaleInStrategy,omitempty"`
	// UpdateStrategy says how VMs follow a changed template.
	// +optional
	UpdateStrategy *VirtualMachinePoolUpdateStrategy `json:"updateStrategy,omitempty"`
	// Autohealing says when a VM that keeps failing to start is replaced.
	// +optional
	Autohealing *VirtualMachinePoolAutohealingStrategy `json:"autohealing,omitempty"`
}

// VirtualMachinePoolAutohealingStrategy says when a failing VM is replaced.
type VirtualMachinePoolAutohealingStrategy struct {
	// StartUpFailureThreshold is the number of consecutive start failures
	// before the VM is replaced (default 3).
	// +optional
	// +kubebuilder:validation:Minimum=1
	StartUpFailureThreshold *uint32 `json:"startUpFailureThreshold,omitempty"`
	// MinFailingToStartDuration is how long a VM must have been failing
	// (its Ready condition false) before it is replaced (default 5m).
	// +optional
	MinFailingToStartDuration *metav1.Duration `json:"minFailingToStartDuration,omitempty"`
}

// VirtualMachinePoolNameGeneration says which names get the VM's index.
type VirtualMachinePoolNameGeneration struct {
	// AppendIndexToConfigMapRefs appends -<index> to the ConfigMaps the
	// template's volumes name.
	// +optional
	AppendIndexToConfigMapRefs *bool `json:"appendIndexToConfigMapRefs,omitempty"`
	// AppendIndexToSecretRefs appends -<index> to the Secrets the
	// template's volumes name (secret, cloud-init and sysprep volumes).
	// +optional
	AppendIndexToSecretRefs *bool `json:"appendIndexToSecretRefs,omitempty"`
}

// VirtualMachinePoolScaleInStrategy says how VMs are removed on scale-in.
type VirtualMachinePoolScaleInStrategy struct {
	// Unmanaged: the pool never removes a VM; users scale in by hand.
	// +optional
	Unmanaged *VirtualMachinePoolUnmanagedStrategy `json:"unmanaged,omitempty"`
	// Opportunistic: the pool waits for VMs to be removed by other means.
	// +optional
	Opportunistic *VirtualMachinePoolOpportunisticScaleInStrategy `json:"opportunistic,omitempty"`
	// Proactive: the pool deletes VMs (the default).
	// +optional
	Proactive *VirtualMachinePoolProactiveScaleInStrategy `json:"proactive,omitempty"`
}

// VirtualMachinePoolOpportunisticScaleInStrategy is the opportunistic scale-in.
type VirtualMachinePoolOpportunisticScaleInStrategy struct {
	// StatePreservation says whether the removed VMs' state is kept.
	// +optional
	// +kubebuilder:validation:Enum=Disabled;Offline;Online
	StatePreservation *StatePreservation `json:"statePreservation,omitempty"`
}

// VirtualMachinePoolProactiveScaleInStrategy is the proactive scale-in.
type VirtualMachinePoolProactiveScaleInStrategy struct {
	// SelectionPolicy says which VMs go first.
	// +optional
	SelectionPolicy *VirtualMachinePoolSelectionPolicy `json:"selectionPolicy,omitempty"`
	// StatePreservation says whether the removed VMs' state is kept.
	// +optional
	// +kubebuilder:validation:Enum=Disabled;Offline;Online
	StatePreservation *StatePreservation `json:"statePreservation,omitempty"`
}

// VirtualMachinePoolSelectionPolicy orders and filters the VMs a scale-in
// or an update picks.
type VirtualMachinePoolSelectionPolicy struct {
	// SortPolicy orders the VMs.
	// +optional
	// +kubebuilder:validation:Enum=AscendingOrder;DescendingOrder;Newest;Oldest;Random
	SortPolicy *VirtualMachinePoolSortPolicy `json:"sortPolicy,omitempty"`
	// Selectors limit the VMs that may be picked.
	// +optional
	Selectors *VirtualMachinePoolSelectors `json:"selectors,omitempty"`
}

// VirtualMachinePoolSelectors limit the VMs a policy picks; when both are
// set, both must match.
type VirtualMachinePoolSelectors struct {
	// LabelSelector matches the VMs' template labels.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// NodeSelectorRequirementMatcher matches the VMs' node selectors.
	// +optional
	NodeSelectorRequirementMatcher *[]corev1.NodeSelectorRequirement `json:"nodeSelectorRequirementMatcher,omitempty"`
}

// VirtualMachinePoolSortPolicy is the order in which VMs are picked.
type VirtualMachinePoolSortPolicy string

// Sort policies.
const (
	VirtualMachinePoolSortPolicyAscendingOrder  VirtualMachinePoolSortPolicy = "AscendingOrder"
	VirtualMachinePoolSortPolicyDescendingOrder VirtualMachinePoolSortPolicy = "DescendingOrder"
	VirtualMachinePoolSortPolicyNewest          VirtualMachinePoolSortPolicy = "Newest"
	VirtualMachinePoolSortPolicyOldest          VirtualMachinePoolSortPolicy = "Oldest"
	VirtualMachinePoolSortPolicyRandom          VirtualMachinePoolSortPolicy = "Random"
)

// VirtualMachinePoolUpdateStrategy says how VMs follow a changed template.
type VirtualMachinePoolUpdateStrategy struct {
	// Unmanaged: VMs are never updated.
	// +optional
	Unmanaged *VirtualMachinePoolUnmanagedStrategy `json:"unmanaged,omitempty"`
	// Opportunistic: the VM is updated; its instance follows at its next restart.
	// +optional
	Opportunistic *VirtualMachineOpportunisticUpdateStrategy `json:"opportunistic,omitempty"`
	// Proactive: the VM is updated and its instance restarted.
	// +optional
	Proactive *VirtualMachinePoolProactiveUpdateStrategy `json:"proactive,omitempty"`
}

// VirtualMachinePoolUnmanagedStrategy leaves the VMs alone.
type VirtualMachinePoolUnmanagedStrategy struct{}

// VirtualMachineOpportunisticUpdateStrategy updates VMs, not their instances.
type VirtualMachineOpportunisticUpdateStrategy struct{}

// VirtualMachinePoolProactiveUpdateStrategy restarts updated VMs.
type VirtualMachinePoolProactiveUpdateStrategy struct {
	// SelectionPolicy says which VMs are updated first.
	// +optional
	SelectionPolicy *VirtualMachinePoolSelectionPolicy `json:"selectionPolicy,omitempty"`
}

// StatePreservation says whether a removed VM's state is kept.
type StatePreservation string

// State preservation modes.
const (
	StatePreservationDisabled StatePreservation = "Disabled"
	StatePreservationOffline  StatePreservation = "Offline"
	StatePreservationOnline   StatePreservation = "Online"
)

// VirtualMachinePoolStatus is the observed state of a pool.
type VirtualMachinePoolStatus struct {
	// Replicas is the number of owned VMs not being deleted.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of owned VMs whose Ready condition is true.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Conditions of the pool.
	// +optional
	// +listType=atomic
	Conditions []VirtualMachinePoolCondition `json:"conditions,omitempty"`
	// LabelSelector is the selector in string form, for the scale subresource.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// VirtualMachinePoolConditionType is the type of a pool condition.
type VirtualMachinePoolConditionType string

// Pool condition types.
const (
	// VirtualMachinePoolReplicaFailure: creating or deleting a VM failed.
	VirtualMachinePoolReplicaFailure VirtualMachinePoolConditionType = "ReplicaFailure"
	// VirtualMachinePoolReplicaPaused: the pool is paused.
	VirtualMachinePoolReplicaPaused VirtualMachinePoolConditionType = "ReplicaPaused"
)

// VirtualMachinePoolCondition is one condition of a pool.
type VirtualMachinePoolCondition struct {
	// Type of the condition.
	Type VirtualMachinePoolConditionType `json:"type"`
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
