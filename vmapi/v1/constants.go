package v1

// Well-known labels, annotations and finalizers, with KubeVirt's values, so
// selectors and tooling written for KubeVirt keep working.
const (
	// AppLabel marks vmkit's pods and objects; launcher pods carry
	// AppLabel=VirtLauncherValue.
	AppLabel = "kubevirt.io"
	// VirtLauncherValue is AppLabel's value on launcher pods.
	VirtLauncherValue = "virt-launcher"
	// VirtHandlerValue is AppLabel's value on node agent pods.
	VirtHandlerValue = "virt-handler"
	// VirtControllerValue is AppLabel's value on controller pods.
	VirtControllerValue = "virt-controller"
	// VirtAPIValue is AppLabel's value on API pods.
	VirtAPIValue = "virt-api"
	// VirtOperatorValue is AppLabel's value on operator pods.
	VirtOperatorValue = "virt-operator"

	// CreatedByLabel on a launcher pod holds the UID of its VMI.
	CreatedByLabel = "kubevirt.io/created-by"
	// DomainAnnotation on a launcher pod holds the name of its VMI.
	DomainAnnotation = "kubevirt.io/domain"
	// NodeNameLabel on a VMI holds the node it runs on.
	NodeNameLabel = "kubevirt.io/nodeName"
	// NodeSchedulable on a node is "true" while its node agent is healthy
	// (the agent writes it). It is also the key of the NoSchedule taint
	// (value "false") earlier versions of virt-controller put on a node
	// whose node agent stopped heartbeating; the current one removes it.
	NodeSchedulable = "kubevirt.io/schedulable"
	// CPUManager on a node is "true" when its kubelet runs the static CPU
	// manager policy (the node agent reads the kubelet's
	// cpu_manager_state), so pods can get CPUs of their own: launcher pods
	// of VMIs with dedicated CPU placement select it.
	CPUManager = "kubevirt.io/cpumanager"
	// DeprecatedCPUManager is CPUManager's earlier name; the node agent
	// writes both, as KubeVirt's virt-handler does.
	DeprecatedCPUManager = "cpumanager"
	// VirtHandlerHeartbeat on a node holds the node agent's last heartbeat (RFC 3339).
	VirtHandlerHeartbeat = "kubevirt.io/heartbeat"
	// VirtualMachineLabel on a VMI holds the name of the VM that created it.
	VirtualMachineLabel = "vm.kubevirt.io/name"
	// MigrationJobLabel on a target launcher pod holds the migration's UID.
	MigrationJobLabel = "kubevirt.io/migrationJobUID"
	// MigrationTargetNodeNameLabel on a VMI holds the node it migrates to.
	MigrationTargetNodeNameLabel = "kubevirt.io/migrationTargetNodeName"
	// MigrationSelectorLabel on a migration holds the VMI's name.
	MigrationSelectorLabel = "kubevirt.io/vmi-name"
	// EphemeralProvisioningObject marks objects created for ephemeral use.
	EphemeralProvisioningObject = "kubevirt.io/ephemeral-provisioning"

	// ManagedByLabel marks objects the operator installed.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByLabelOperatorValue is ManagedByLabel's value on operator-installed objects.
	ManagedByLabelOperatorValue = "virt-operator"
	// InstallStrategyLabel marks the ConfigMaps holding install strategies.
	InstallStrategyLabel = "kubevirt.io/install-strategy"
	// InstallStrategyVersionAnnotation holds the version an object was installed for.
	InstallStrategyVersionAnnotation = "kubevirt.io/install-strategy-version"
	// InstallStrategyRegistryAnnotation holds the registry an object was installed from.
	InstallStrategyRegistryAnnotation = "kubevirt.io/install-strategy-registry"
	// InstallStrategyIdentifierAnnotation holds the deployment ID an object belongs to.
	InstallStrategyIdentifierAnnotation = "kubevirt.io/install-strategy-identifier"

	// InstancetypeAnnotation on a VMI names the VirtualMachineInstancetype
	// it was made with.
	InstancetypeAnnotation = "kubevirt.io/instancetype-name"
	// ClusterInstancetypeAnnotation on a VMI names the
	// VirtualMachineClusterInstancetype it was made with.
	ClusterInstancetypeAnnotation = "kubevirt.io/cluster-instancetype-name"
	// PreferenceAnnotation on a VMI names the VirtualMachinePreference it
	// was made with.
	PreferenceAnnotation = "kubevirt.io/preference-name"
	// ClusterPreferenceAnnotation on a VMI names the
	// VirtualMachineClusterPreference it was made with.
	ClusterPreferenceAnnotation = "kubevirt.io/cluster-preference-name"

	// PVCMemoryDumpAnnotation on a claim names the memory dump written on
	// it (the file, <vmi>-<claim>-<yyyymmdd-hhmmss>.memory.dump), or says
	// "Memory dump failed" (KubeVirt's).
	PVCMemoryDumpAnnotation = "kubevirt.io/memory-dump"

	// VirtualMachineInstanceFinalizer keeps a VMI until the node agent has
	// removed its domain.
	VirtualMachineInstanceFinalizer = "foregroundDeleteVirtualMachine"
	// VirtualMachineControllerFinalizer keeps a VMI until the VMI controller
	// has deleted its launcher pods.
	VirtualMachineControllerFinalizer = "kubevirt.io/virtualMachineControllerFinalize"
	// KubeVirtFinalizer keeps the KubeVirt CR until everything it installed is removed.
	KubeVirtFinalizer = "foregroundDeleteKubeVirt"

	// KVMDevice is the extended resource giving a pod /dev/kvm.
	KVMDevice = "devices.kubevirt.io/kvm"
	// TunDevice is the extended resource giving a pod /dev/net/tun.
	TunDevice = "devices.kubevirt.io/tun"
	// VhostNetDevice is the extended resource giving a pod /dev/vhost-net.
	VhostNetDevice = "devices.kubevirt.io/vhost-net"
)

// ReservedVMILabels are the labels of a VirtualMachineInstance that only
// KubeVirt's components set, change or remove (KubeVirt's
// restrictedVmiLabels): the install strategy's admission policy refuses
// them from anyone else, and the controllers leave them out of the VMIs
// they create from a template.
func ReservedVMILabels() []string {
	return []string{CreatedByLabel, MigrationJobLabel, NodeNameLabel, MigrationTargetNodeNameLabel, NodeSchedulable, InstallStrategyLabel}
}

// WithoutReservedVMILabels returns a copy of labels without
// ReservedVMILabels (nil for nil).
func WithoutReservedVMILabels(labels map[string]string) map[string]string {
	if labels == nil {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k] = v
	}
	for _, k := range ReservedVMILabels() {
		delete(out, k)
	}
	return out
}
