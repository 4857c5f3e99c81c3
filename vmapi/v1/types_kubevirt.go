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
// +kubebuilder:resource:path=kubevirts,singular=kubevirt,shortName=kv;kvs,categories=all
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
	// CertificateRotateStrategy is how the components' certificates
	// rotate.
	// +optional
	CertificateRotateStrategy KubeVirtCertificateRotateStrategy `json:"certificateRotateStrategy,omitempty"`
	// WorkloadUpdateStrategy is how running VMIs move to a new launcher
	// after an update.
	// +optional
	WorkloadUpdateStrategy KubeVirtWorkloadUpdateStrategy `json:"workloadUpdateStrategy,omitempty"`
	// ServiceMonitorNamespace is where the ServiceMonitor goes;
	// monitorNamespace when unset.
	// +optional
	ServiceMonitorNamespace string `json:"serviceMonitorNamespace,omitempty"`
	// CustomizeComponents changes the installed components.
	// +optional
	CustomizeComponents CustomizeComponents `json:"customizeComponents,omitempty"`
	// SynchronizationPort is the port of the synchronization controller
	// (migrations between clusters); 9185 when unset.
	// +optional
	SynchronizationPort string `json:"synchronizationPort,omitempty"`
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
	// MinCPUModel is the oldest CPU model guests may get (host-model's
	// lower bound).
	// +optional
	MinCPUModel string `json:"minCPUModel,omitempty"`
	// ObsoleteCPUModels are CPU models nodes must not offer, by name.
	// +optional
	ObsoleteCPUModels map[string]bool `json:"obsoleteCPUModels,omitempty"`
	// MemBalloonStatsPeriod is seconds between balloon statistics; 10
	// when unset, 0 turns them off.
	// +optional
	MemBalloonStatsPeriod *uint32 `json:"memBalloonStatsPeriod,omitempty"`
	// OVMFPath is the directory holding the EFI firmware (superseded
	// upstream by architectureConfiguration).
	// +optional
	OVMFPath string `json:"ovmfPath,omitempty"`
	// SELinuxLauncherType is the SELinux type of launcher pods.
	// +optional
	SELinuxLauncherType string `json:"selinuxLauncherType,omitempty"`
	// Network is the cluster's network defaults and binding plugins.
	// +optional
	Network *NetworkConfiguration `json:"network,omitempty"`
	// SMBIOS is the system information guests see.
	// +optional
	SMBIOS *SMBiosConfiguration `json:"smbios,omitempty"`
	// ArchitectureConfiguration holds per-architecture defaults.
	// +optional
	ArchitectureConfiguration *ArchConfiguration `json:"architectureConfiguration,omitempty"`
	// SupportedGuestAgentVersions are the guest agent versions reported
	// as supported (regular expressions).
	// +optional
	// +listType=atomic
	SupportedGuestAgentVersions []string `json:"supportedGuestAgentVersions,omitempty"`
	// PermittedHostDevices are the host devices guests may ask for.
	// +optional
	PermittedHostDevices *PermittedHostDevices `json:"permittedHostDevices,omitempty"`
	// MediatedDevicesConfiguration says which mediated devices the node
	// agents create.
	// +optional
	MediatedDevicesConfiguration *MediatedDevicesConfiguration `json:"mediatedDevicesConfiguration,omitempty"`
	// VirtualMachineInstancesPerNode caps the VMIs on one node.
	// +optional
	VirtualMachineInstancesPerNode *int `json:"virtualMachineInstancesPerNode,omitempty"`
	// APIConfiguration is virt-api's reloadable configuration.
	// +optional
	APIConfiguration *ReloadableComponentConfiguration `json:"apiConfiguration,omitempty"`
	// WebhookConfiguration is the webhooks' reloadable configuration.
	// +optional
	WebhookConfiguration *ReloadableComponentConfiguration `json:"webhookConfiguration,omitempty"`
	// ControllerConfiguration is virt-controller's reloadable
	// configuration.
	// +optional
	ControllerConfiguration *ReloadableComponentConfiguration `json:"controllerConfiguration,omitempty"`
	// HandlerConfiguration is virt-handler's reloadable configuration.
	// +optional
	HandlerConfiguration *ReloadableComponentConfiguration `json:"handlerConfiguration,omitempty"`
	// TLSConfiguration of the components' servers.
	// +optional
	TLSConfiguration *TLSConfiguration `json:"tlsConfiguration,omitempty"`
	// SeccompConfiguration of launcher pods.
	// +optional
	SeccompConfiguration *SeccompConfiguration `json:"seccompConfiguration,omitempty"`
	// VMStateStorageClass is the storage class of persistent guest state
	// (TPM, EFI variables).
	// +optional
	VMStateStorageClass string `json:"vmStateStorageClass,omitempty"`
	// VirtualMachineOptions are cluster-wide defaults of guests.
	// +optional
	VirtualMachineOptions *VirtualMachineOptions `json:"virtualMachineOptions,omitempty"`
	// KSMConfiguration picks the nodes with kernel same-page merging.
	// +optional
	KSMConfiguration *KSMConfiguration `json:"ksmConfiguration,omitempty"`
	// AutoCPULimitNamespaceLabelSelector picks namespaces whose launcher
	// pods get a CPU limit equal to their request.
	// +optional
	AutoCPULimitNamespaceLabelSelector *metav1.LabelSelector `json:"autoCPULimitNamespaceLabelSelector,omitempty"`
	// LiveUpdateConfiguration bounds CPU and memory hotplug.
	// +optional
	LiveUpdateConfiguration *LiveUpdateConfiguration `json:"liveUpdateConfiguration,omitempty"`
	// VMRolloutStrategy is how a change to a running VM's template is
	// applied: Stage (at the next restart) or LiveUpdate.
	// +optional
	// +kubebuilder:validation:Enum=Stage;LiveUpdate
	VMRolloutStrategy *VMRolloutStrategy `json:"vmRolloutStrategy,omitempty"`
	// CommonInstancetypesDeployment turns the common instance types on or
	// off.
	// +optional
	CommonInstancetypesDeployment *CommonInstancetypesDeployment `json:"commonInstancetypesDeployment,omitempty"`
	// VirtTemplateDeployment turns virt-template on or off.
	// +optional
	VirtTemplateDeployment *VirtTemplateDeployment `json:"virtTemplateDeployment,omitempty"`
	// Instancetype configures instance-type handling.
	// +optional
	Instancetype *InstancetypeConfiguration `json:"instancetype,omitempty"`
	// Hypervisors available; the first is used.
	// +optional
	// +listType=atomic
	Hypervisors []HypervisorConfiguration `json:"hypervisors,omitempty"`
	// ChangedBlockTrackingLabelSelectors pick the VMs with changed-block
	// tracking.
	// +optional
	ChangedBlockTrackingLabelSelectors *ChangedBlockTrackingSelectors `json:"changedBlockTrackingLabelSelectors,omitempty"`
	// SupportContainerResources are the resources of the launcher's
	// helper containers, by type.
	// +optional
	// +listType=map
	// +listMapKey=type
	SupportContainerResources []SupportContainerResources `json:"supportContainerResources,omitempty"`
	// AdditionalGuestMemoryOverheadRatio multiplies the launcher's
	// computed memory overhead, a decimal string ("1.5").
	// +optional
	AdditionalGuestMemoryOverheadRatio *string `json:"additionalGuestMemoryOverheadRatio,omitempty"`
	// RoleAggregationStrategy: AggregateToDefault adds KubeVirt's roles
	// to the default admin, edit and view roles; Manual does not.
	// +optional
	// +kubebuilder:validation:Enum=AggregateToDefault;Manual
	RoleAggregationStrategy *RoleAggregationStrategy `json:"roleAggregationStrategy,omitempty"`
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
	// DisabledFeatureGates turned off even where on by default.
	// +optional
	// +listType=atomic
	DisabledFeatureGates []string `json:"disabledFeatureGates,omitempty"`
	// CPUAllocationRatio is vCPUs per requested host CPU; 10 when unset.
	// +optional
	CPUAllocationRatio int `json:"cpuAllocationRatio,omitempty"`
	// MinimumClusterTSCFrequency is the TSC frequency below which a node
	// cannot run guests that need a stable TSC.
	// +optional
	MinimumClusterTSCFrequency *int64 `json:"minimumClusterTSCFrequency,omitempty"`
	// DiskVerification bounds the memory of disk-image checks.
	// +optional
	DiskVerification *DiskVerification `json:"diskVerification,omitempty"`
	// ClusterProfiler turns on the components' profiling endpoints.
	// +optional
	ClusterProfiler bool `json:"clusterProfiler,omitempty"`
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
	// VirtSynchronizationController verbosity.
	// +optional
	VirtSynchronizationController uint `json:"virtSynchronizationController,omitempty"`
	// NodeVerbosity overrides virt-handler's and virt-launcher's
	// verbosity on named nodes.
	// +optional
	NodeVerbosity map[string]uint `json:"nodeVerbosity,omitempty"`
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
	// NodeDrainTaintKey is the taint that marks a node being drained
	// (kubevirt.io/drain when unset).
	// +optional
	NodeDrainTaintKey *string `json:"nodeDrainTaintKey,omitempty"`
	// MatchSELinuxLevelOnMigration gives the target launcher the source's
	// SELinux level.
	// +optional
	MatchSELinuxLevelOnMigration *bool `json:"matchSELinuxLevelOnMigration,omitempty"`
	// AllowWorkloadDisruption lets a migration that cannot converge pause
	// the guest to finish.
	// +optional
	AllowWorkloadDisruption *bool `json:"allowWorkloadDisruption,omitempty"`
	// UtilityVolumesTimeout is seconds a migration waits for utility
	// volumes to detach.
	// +optional
	UtilityVolumesTimeout *int64 `json:"utilityVolumesTimeout,omitempty"`
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
	// Generations of the objects the operator last applied.
	// +optional
	// +listType=atomic
	Generations []GenerationStatus `json:"generations,omitempty"`
	// SynchronizationAddresses of the synchronization controller.
	// +optional
	// +listType=atomic
	SynchronizationAddresses []string `json:"synchronizationAddresses,omitempty"`
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
