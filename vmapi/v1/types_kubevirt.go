package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeVirt is the installation of vmkit in a cluster; the operator
// reconciles it into CRDs, RBAC, Deployments and a DaemonSet.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=kubevirts,singular=kubevirt,shortName=kv;kvs,categories=all;kubevirt
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
type KubeVirt struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the requested installation.
	Spec KubeVirtSpec `json:"spec"`
	// Status is the observed installation.
	// +optional
	Status KubeVirtStatus `json:"status,omitempty"`
}

// KubeVirtList is a list of KubeVirt installations.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type KubeVirtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeVirt `json:"items"`
}

// KubeVirtSpec is the requested installation.
type KubeVirtSpec struct {
	// ImageTag of the components; the operator's own version when unset.
	// +optional
	ImageTag string `json:"imageTag,omitempty"`
	// ImageRegistry of the components; the operator's own registry when unset.
	// +optional
	ImageRegistry string `json:"imageRegistry,omitempty"`
	// ImagePullPolicy of the components.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets of the components.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// MonitorNamespace is where Prometheus runs.
	// +optional
	MonitorNamespace string `json:"monitorNamespace,omitempty"`
	// MonitorAccount is Prometheus' service account.
	// +optional
	MonitorAccount string `json:"monitorAccount,omitempty"`
	// ProductName labels the installed components.
	// +optional
	ProductName string `json:"productName,omitempty"`
	// ProductVersion labels the installed components.
	// +optional
	ProductVersion string `json:"productVersion,omitempty"`
	// ProductComponent labels the installed components.
	// +optional
	ProductComponent string `json:"productComponent,omitempty"`
	// Configuration is the cluster-wide configuration of the components.
	// +optional
	Configuration KubeVirtConfiguration `json:"configuration,omitempty"`
	// Infra places the control-plane components (virt-api, virt-controller).
	// +optional
	// +nullable
	Infra *ComponentConfig `json:"infra,omitempty"`
	// Workloads places the node components (virt-handler) and so the VMs.
	// +optional
	// +nullable
	Workloads *ComponentConfig `json:"workloads,omitempty"`
	// UninstallStrategy says whether deleting the CR removes workloads.
	// +optional
	UninstallStrategy KubeVirtUninstallStrategy `json:"uninstallStrategy,omitempty"`
}

// KubeVirtUninstallStrategy says what deleting the KubeVirt CR does to workloads.
//
// +kubebuilder:validation:Enum=RemoveWorkloads;BlockUninstallIfWorkloadsExist
type KubeVirtUninstallStrategy string

// Uninstall strategies.
const (
	// KubeVirtUninstallStrategyRemoveWorkloads deletes VMs and VMIs along with vmkit.
	KubeVirtUninstallStrategyRemoveWorkloads KubeVirtUninstallStrategy = "RemoveWorkloads"
	// KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist refuses to uninstall while VMs exist.
	KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist KubeVirtUninstallStrategy = "BlockUninstallIfWorkloadsExist"
)

// ComponentConfig places a group of components.
type ComponentConfig struct {
	// NodePlacement constrains the components' nodes.
	// +optional
	NodePlacement *NodePlacement `json:"nodePlacement,omitempty"`
	// Replicas of each Deployment in the group.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *uint8 `json:"replicas,omitempty"`
}

// NodePlacement constrains which nodes run a component.
type NodePlacement struct {
	// NodeSelector of the component's pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity of the component's pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the component's pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// KubeVirtConfiguration is the cluster-wide configuration.
type KubeVirtConfiguration struct {
	// CPUModel is the default CPU model of guests.
	// +optional
	CPUModel string `json:"cpuModel,omitempty"`
	// CPURequest is the default CPU request of launcher pods (100m when unset).
	// +optional
	CPURequest *resource.Quantity `json:"cpuRequest,omitempty"`
	// DeveloperConfiguration holds feature gates and emulation.
	// +optional
	DeveloperConfiguration *DeveloperConfiguration `json:"developerConfiguration,omitempty"`
	// EmulatedMachines are the machine types guests may request.
	// +optional
	EmulatedMachines []string `json:"emulatedMachines,omitempty"`
	// ImagePullPolicy of launcher pods.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// MigrationConfiguration holds live-migration limits.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrations,omitempty"`
	// MachineType is the default machine type of guests.
	// +optional
	MachineType string `json:"machineType,omitempty"`
	// EvictionStrategy is the default eviction strategy of guests.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`
	// DefaultRuntimeClass of launcher pods.
	// +optional
	DefaultRuntimeClass string `json:"defaultRuntimeClass,omitempty"`
}

// DeveloperConfiguration holds feature gates and developer settings.
type DeveloperConfiguration struct {
	// FeatureGates turned on.
	// +optional
	FeatureGates []string `json:"featureGates,omitempty"`
	// UseEmulation runs guests under software emulation (QEMU TCG) when
	// nodes have no usable KVM.
	// +optional
	UseEmulation bool `json:"useEmulation,omitempty"`
	// MemoryOvercommit is the percentage of guest memory requested from the
	// node (100 means none overcommitted).
	// +optional
	MemoryOvercommit int `json:"memoryOvercommit,omitempty"`
	// NodeSelectors are added to every launcher pod.
	// +optional
	NodeSelectors map[string]string `json:"nodeSelectors,omitempty"`
	// PVCTolerateLessSpaceUpToPercent tolerates PVCs this much smaller than requested.
	// +optional
	LessPVCSpaceToleration int `json:"pvcTolerateLessSpaceUpToPercent,omitempty"`
	// MinimumReservePVCBytes kept free on file-system PVCs.
	// +optional
	MinimumReservePVCBytes uint64 `json:"minimumReservePVCBytes,omitempty"`
	// LogVerbosity of the components.
	// +optional
	LogVerbosity *LogVerbosity `json:"logVerbosity,omitempty"`
}

// LogVerbosity is the log verbosity of each component.
type LogVerbosity struct {
	// VirtAPI verbosity.
	// +optional
	VirtAPI uint `json:"virtAPI,omitempty"`
	// VirtController verbosity.
	// +optional
	VirtController uint `json:"virtController,omitempty"`
	// VirtHandler verbosity.
	// +optional
	VirtHandler uint `json:"virtHandler,omitempty"`
	// VirtLauncher verbosity.
	// +optional
	VirtLauncher uint `json:"virtLauncher,omitempty"`
	// VirtOperator verbosity.
	// +optional
	VirtOperator uint `json:"virtOperator,omitempty"`
}

// MigrationConfiguration holds live-migration limits.
type MigrationConfiguration struct {
	// ParallelMigrationsPerCluster bounds migrations running at once.
	// +optional
	ParallelMigrationsPerCluster *uint32 `json:"parallelMigrationsPerCluster,omitempty"`
	// ParallelOutboundMigrationsPerNode bounds migrations leaving one node.
	// +optional
	ParallelOutboundMigrationsPerNode *uint32 `json:"parallelOutboundMigrationsPerNode,omitempty"`
	// BandwidthPerMigration bounds each migration's bandwidth.
	// +optional
	BandwidthPerMigration *resource.Quantity `json:"bandwidthPerMigration,omitempty"`
	// CompletionTimeoutPerGiB is seconds per GiB before a migration is cancelled.
	// +optional
	CompletionTimeoutPerGiB *int64 `json:"completionTimeoutPerGiB,omitempty"`
	// ProgressTimeout is seconds without progress before a migration is cancelled.
	// +optional
	ProgressTimeout *int64 `json:"progressTimeout,omitempty"`
	// UnsafeMigrationOverride allows migrations libvirt considers unsafe.
	// +optional
	UnsafeMigrationOverride *bool `json:"unsafeMigrationOverride,omitempty"`
	// AllowAutoConverge throttles the guest to make migrations converge.
	// +optional
	AllowAutoConverge *bool `json:"allowAutoConverge,omitempty"`
	// AllowPostCopy switches to post-copy when pre-copy does not converge.
	// +optional
	AllowPostCopy *bool `json:"allowPostCopy,omitempty"`
	// DisableTLS turns off TLS for migration traffic.
	// +optional
	DisableTLS *bool `json:"disableTLS,omitempty"`
	// Network is a NetworkAttachmentDefinition dedicated to migrations.
	// +optional
	Network *string `json:"network,omitempty"`
}

// KubeVirtPhase is a phase of an installation.
//
// +kubebuilder:validation:Enum="";Deploying;Deployed;Deleting;Deleted
type KubeVirtPhase string

// Installation phases.
const (
	KubeVirtPhaseUnset     KubeVirtPhase = ""
	KubeVirtPhaseDeploying KubeVirtPhase = "Deploying"
	KubeVirtPhaseDeployed  KubeVirtPhase = "Deployed"
	KubeVirtPhaseDeleting  KubeVirtPhase = "Deleting"
	KubeVirtPhaseDeleted   KubeVirtPhase = "Deleted"
)

// KubeVirtStatus is the observed installation.
type KubeVirtStatus struct {
	// Phase of the installation.
	// +optional
	Phase KubeVirtPhase `json:"phase,omitempty"`
	// Conditions of the installation.
	// +optional
	Conditions []KubeVirtCondition `json:"conditions,omitempty"`
	// OperatorVersion is the version of the operator.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// TargetKubeVirtVersion is the version being installed.
	// +optional
	TargetKubeVirtVersion string `json:"targetKubeVirtVersion,omitempty"`
	// TargetKubeVirtRegistry is the registry being installed from.
	// +optional
	TargetKubeVirtRegistry string `json:"targetKubeVirtRegistry,omitempty"`
	// TargetDeploymentConfig is the JSON of the configuration being installed.
	// +optional
	TargetDeploymentConfig string `json:"targetDeploymentConfig,omitempty"`
	// TargetDeploymentID identifies the configuration being installed.
	// +optional
	TargetDeploymentID string `json:"targetDeploymentID,omitempty"`
	// ObservedKubeVirtVersion is the version installed.
	// +optional
	ObservedKubeVirtVersion string `json:"observedKubeVirtVersion,omitempty"`
	// ObservedKubeVirtRegistry is the registry installed from.
	// +optional
	ObservedKubeVirtRegistry string `json:"observedKubeVirtRegistry,omitempty"`
	// ObservedDeploymentConfig is the JSON of the configuration installed.
	// +optional
	ObservedDeploymentConfig string `json:"observedDeploymentConfig,omitempty"`
	// ObservedDeploymentID identifies the configuration installed.
	// +optional
	ObservedDeploymentID string `json:"observedDeploymentID,omitempty"`
	// OutdatedVirtualMachineInstanceWorkloads counts VMIs on an old launcher.
	// +optional
	OutdatedVirtualMachineInstanceWorkloads *int `json:"outdatedVirtualMachineInstanceWorkloads,omitempty"`
	// ObservedGeneration is the CR generation last acted on.
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// DefaultArchitecture of guests.
	// +optional
	DefaultArchitecture string `json:"defaultArchitecture,omitempty"`
}

// KubeVirtConditionType is the type of an installation condition.
type KubeVirtConditionType string

// Installation condition types.
const (
	// KubeVirtConditionAvailable: every component is installed and ready.
	KubeVirtConditionAvailable KubeVirtConditionType = "Available"
	// KubeVirtConditionProgressing: an install or update is in progress.
	KubeVirtConditionProgressing KubeVirtConditionType = "Progressing"
	// KubeVirtConditionDegraded: some component is not ready.
	KubeVirtConditionDegraded KubeVirtConditionType = "Degraded"
	// KubeVirtConditionCreated: every object of the strategy exists.
	KubeVirtConditionCreated KubeVirtConditionType = "Created"
	// KubeVirtConditionSynchronized: the operator could (True) or could not (False) apply the strategy.
	KubeVirtConditionSynchronized KubeVirtConditionType = "Synchronized"
)

// KubeVirtCondition is one condition of an installation.
type KubeVirtCondition struct {
	// Type of the condition.
	Type KubeVirtConditionType `json:"type"`
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
