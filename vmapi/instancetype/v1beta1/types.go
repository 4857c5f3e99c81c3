package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// VirtualMachineInstancetype is an instance type in one namespace: the
// vCPUs, memory and devices of the VMs that name it.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstancetypes,singular=virtualmachineinstancetype,scope=Namespaced,shortName=vminstancetype;vminstancetypes;vmf;vmfs,categories=all
// +kubebuilder:printcolumn:name="CPU",type=integer,JSONPath=".spec.cpu.guest"
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=".spec.memory.guest"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachineInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the instance type.
	Spec VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineInstancetypeList is a list of VirtualMachineInstancetypes.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstancetypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstancetype `json:"items"`
}

// VirtualMachineClusterInstancetype is an instance type for every namespace.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineclusterinstancetypes,singular=virtualmachineclusterinstancetype,scope=Cluster,shortName=vmclusterinstancetype;vmclusterinstancetypes;vmcf;vmcfs
// +kubebuilder:printcolumn:name="CPU",type=integer,JSONPath=".spec.cpu.guest"
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=".spec.memory.guest"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachineClusterInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the instance type.
	Spec VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineClusterInstancetypeList is a list of VirtualMachineClusterInstancetypes.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineClusterInstancetypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClusterInstancetype `json:"items"`
}

// VirtualMachineInstancetypeSpec is what an instance type gives a VM. CPU
// and memory are required; a VM using the instance type must leave what it
// sets unset in its template (a conflict otherwise).
//
// +kubebuilder:validation:XValidation:rule="!has(self.memory.overcommitPercent) || self.memory.overcommitPercent == 0 || !has(self.memory.hugepages)",message="spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together.",fieldPath=".memory.overcommitPercent"
type VirtualMachineInstancetypeSpec struct {
	// NodeSelector must match a node's labels for the VM to run there.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// SchedulerName is the scheduler of the VM's launcher pod.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// CPU of the instance type.
	CPU CPUInstancetype `json:"cpu"`
	// Memory of the instance type.
	Memory MemoryInstancetype `json:"memory"`
	// GPUs of the instance type.
	// +optional
	// +listType=atomic
	GPUs []v1.GPU `json:"gpus,omitempty"`
	// HostDevices of the instance type.
	// +optional
	// +listType=atomic
	HostDevices []v1.HostDevice `json:"hostDevices,omitempty"`
	// IOThreadsPolicy of the instance type.
	// +optional
	IOThreadsPolicy *v1.IOThreadsPolicy `json:"ioThreadsPolicy,omitempty"`
	// IOThreads sizes the supplementalPool policy.
	// +optional
	IOThreads *v1.DiskIOThreads `json:"ioThreads,omitempty"`
	// LaunchSecurity of the instance type. Deprecated upstream in favour of
	// the preference's preferredLaunchSecurity.
	// +optional
	LaunchSecurity *v1.LaunchSecurity `json:"launchSecurity,omitempty"`
	// Annotations added to the VM's instances; a template annotation with
	// another value is a conflict.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CPUInstancetype is the CPU of an instance type.
type CPUInstancetype struct {
	// Guest is the number of vCPUs. They become sockets, cores or threads as
	// the VM's preference says (sockets by default).
	// +kubebuilder:validation:Minimum=1
	Guest uint32 `json:"guest"`
	// Model is the CPU model (host-model when unset).
	// +optional
	Model *string `json:"model,omitempty"`
	// DedicatedCPUPlacement pins each vCPU to a dedicated host CPU.
	// +optional
	DedicatedCPUPlacement *bool `json:"dedicatedCPUPlacement,omitempty"`
	// NUMA configures the guest's NUMA topology.
	// +optional
	NUMA *v1.NUMA `json:"numa,omitempty"`
	// IsolateEmulatorThread gives QEMU's emulator thread its own host CPU.
	// +optional
	IsolateEmulatorThread *bool `json:"isolateEmulatorThread,omitempty"`
	// Realtime tunes the guest for low latency.
	// +optional
	Realtime *v1.Realtime `json:"realtime,omitempty"`
	// MaxSockets bounds CPU hotplug.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxSockets *uint32 `json:"maxSockets,omitempty"`
}

// MemoryInstancetype is the memory of an instance type.
type MemoryInstancetype struct {
	// Guest is the memory the guest sees.
	Guest resource.Quantity `json:"guest"`
	// Hugepages backs the guest's memory with huge pages.
	// +optional
	Hugepages *v1.Hugepages `json:"hugepages,omitempty"`
	// OvercommitPercent lowers the launcher pod's memory request below the
	// guest memory by this percentage (0 by default).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	OvercommitPercent int `json:"overcommitPercent,omitempty"`
	// MaxGuest bounds memory hotplug.
	// +optional
	MaxGuest *resource.Quantity `json:"maxGuest,omitempty"`
}

// VirtualMachinePreference is a preference in one namespace: the devices,
// features and firmware that suit a guest OS, used where a VM's template
// leaves them unset.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachinepreferences,singular=virtualmachinepreference,scope=Namespaced,shortName=vmpref;vmprefs;vmp;vmps,categories=all
type VirtualMachinePreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the preference.
	Spec VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachinePreferenceList is a list of VirtualMachinePreferences.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachinePreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachinePreference `json:"items"`
}

// VirtualMachineClusterPreference is a preference for every namespace.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineclusterpreferences,singular=virtualmachineclusterpreference,scope=Cluster,shortName=vmcp;vmcps
type VirtualMachineClusterPreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the preference.
	Spec VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachineClusterPreferenceList is a list of VirtualMachineClusterPreferences.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineClusterPreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClusterPreference `json:"items"`
}

// VirtualMachinePreferenceSpec is what a preference offers a VM: each
// preferred value is used where the template leaves the field unset.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.cpu) && has(self.cpu.preferredCPUTopology) && self.cpu.preferredCPUTopology in ['spread', 'preferSpread'] && has(self.cpu.spreadOptions) && has(self.cpu.spreadOptions.across) && self.cpu.spreadOptions.across == 'CoresThreads') || (has(self.cpu.spreadOptions.ratio) ? self.cpu.spreadOptions.ratio == 2 : (!has(self.preferSpreadSocketToCoreRatio) || self.preferSpreadSocketToCoreRatio == 2))",message="only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads",fieldPath=".cpu.spreadOptions"
type VirtualMachinePreferenceSpec struct {
	// Clock preferences.
	// +optional
	Clock *ClockPreferences `json:"clock,omitempty"`
	// CPU preferences.
	// +optional
	CPU *CPUPreferences `json:"cpu,omitempty"`
	// Devices preferences.
	// +optional
	Devices *DevicePreferences `json:"devices,omitempty"`
	// Features preferences.
	// +optional
	Features *FeaturePreferences `json:"features,omitempty"`
	// Firmware preferences.
	// +optional
	Firmware *FirmwarePreferences `json:"firmware,omitempty"`
	// Machine preferences.
	// +optional
	Machine *MachinePreferences `json:"machine,omitempty"`
	// Volumes preferences.
	// +optional
	Volumes *VolumePreferences `json:"volumes,omitempty"`
	// PreferredSubdomain is the instance's subdomain.
	// +optional
	PreferredSubdomain *string `json:"preferredSubdomain,omitempty"`
	// PreferredTerminationGracePeriodSeconds is the instance's termination
	// grace period.
	// +optional
	PreferredTerminationGracePeriodSeconds *int64 `json:"preferredTerminationGracePeriodSeconds,omitempty"`
	// Requirements are the least vCPUs and memory (and the architecture)
	// the guest needs; a VM that gives less does not start.
	// +optional
	Requirements *PreferenceRequirements `json:"requirements,omitempty"`
	// Annotations added to the VM's instances where the template does not
	// set them.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// PreferSpreadSocketToCoreRatio is the sockets-to-cores ratio of the
	// spread topology (2 by default).
	// +optional
	PreferSpreadSocketToCoreRatio uint32 `json:"preferSpreadSocketToCoreRatio,omitempty"`
	// PreferredArchitecture is the instance's architecture.
	// +optional
	PreferredArchitecture *string `json:"preferredArchitecture,omitempty"`
	// PreferredLaunchSecurity is the instance's launch security.
	// +optional
	PreferredLaunchSecurity *v1.LaunchSecurity `json:"preferredLaunchSecurity,omitempty"`
}

// VolumePreferences are preferences for the VM's volumes.
type VolumePreferences struct {
	// PreferredStorageClassName is the storage class of the VM's
	// dataVolumeTemplates that name none.
	// +optional
	PreferredStorageClassName string `json:"preferredStorageClassName,omitempty"`
}

// PreferredCPUTopology is how an instance type's vCPUs are shown to the guest.
//
// +kubebuilder:validation:Enum=preferCores;preferSockets;preferThreads;preferSpread;preferAny;cores;sockets;threads;spread;any
type PreferredCPUTopology string

// CPU topologies. The prefer* spellings are deprecated upstream.
const (
	DeprecatedPreferCores   PreferredCPUTopology = "preferCores"
	DeprecatedPreferSockets PreferredCPUTopology = "preferSockets"
	DeprecatedPreferThreads PreferredCPUTopology = "preferThreads"
	DeprecatedPreferSpread  PreferredCPUTopology = "preferSpread"
	DeprecatedPreferAny     PreferredCPUTopology = "preferAny"

	// Cores: every vCPU is a core of one socket.
	Cores PreferredCPUTopology = "cores"
	// Sockets: every vCPU is a socket (the default).
	Sockets PreferredCPUTopology = "sockets"
	// Threads: every vCPU is a thread of one core.
	Threads PreferredCPUTopology = "threads"
	// Spread: vCPUs are spread over sockets and cores (or as spreadOptions say).
	Spread PreferredCPUTopology = "spread"
	// Any: the template's topology, or sockets with an instance type.
	Any PreferredCPUTopology = "any"
)

// CPUPreferences are preferences for the guest's CPU.
type CPUPreferences struct {
	// PreferredCPUTopology is how the instance type's vCPUs are shown to the
	// guest; sockets when unset.
	// +optional
	PreferredCPUTopology *PreferredCPUTopology `json:"preferredCPUTopology,omitempty"`
	// SpreadOptions tune the spread topology.
	// +optional
	SpreadOptions *SpreadOptions `json:"spreadOptions,omitempty"`
	// PreferredCPUFeatures are added to the template's CPU features unless
	// it names them already.
	// +optional
	PreferredCPUFeatures []v1.CPUFeature `json:"preferredCPUFeatures,omitempty"`
}

// SpreadAcross is what the spread topology spreads vCPUs across.
//
// +kubebuilder:validation:Enum=SocketsCoresThreads;SocketsCores;CoresThreads
type SpreadAcross string

// Spreads.
const (
	SpreadAcrossSocketsCoresThreads SpreadAcross = "SocketsCoresThreads"
	SpreadAcrossSocketsCores        SpreadAcross = "SocketsCores"
	SpreadAcrossCoresThreads        SpreadAcross = "CoresThreads"
)

// SpreadOptions tune the spread topology.
type SpreadOptions struct {
	// Across is SocketsCores (the default), CoresThreads or SocketsCoresThreads.
	// +optional
	Across *SpreadAcross `json:"across,omitempty"`
	// Ratio is the ratio of sockets to cores (SocketsCores,
	// SocketsCoresThreads with two threads per core) or of cores to threads
	// (CoresThreads, where only 2 is allowed); 2 by default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Ratio *uint32 `json:"ratio,omitempty"`
}

// DevicePreferences are preferences for the guest's devices.
type DevicePreferences struct {
	// PreferredAutoattachGraphicsDevice for devices.autoattachGraphicsDevice.
	// +optional
	PreferredAutoattachGraphicsDevice *bool `json:"preferredAutoattachGraphicsDevice,omitempty"`
	// PreferredAutoattachMemBalloon for devices.autoattachMemBalloon.
	// +optional
	PreferredAutoattachMemBalloon *bool `json:"preferredAutoattachMemBalloon,omitempty"`
	// PreferredAutoattachPodInterface for devices.autoattachPodInterface.
	// +optional
	PreferredAutoattachPodInterface *bool `json:"preferredAutoattachPodInterface,omitempty"`
	// PreferredAutoattachSerialConsole for devices.autoattachSerialConsole.
	// +optional
	PreferredAutoattachSerialConsole *bool `json:"preferredAutoattachSerialConsole,omitempty"`
	// PreferredAutoattachInputDevice for devices.autoattachInputDevice.
	// +optional
	PreferredAutoattachInputDevice *bool `json:"preferredAutoattachInputDevice,omitempty"`
	// PreferredDisableHotplug for devices.disableHotplug.
	// +optional
	PreferredDisableHotplug *bool `json:"preferredDisableHotplug,omitempty"`
	// PreferredVirtualGPUOptions for the GPUs' virtualGPUOptions.
	// +optional
	PreferredVirtualGPUOptions *v1.VGPUOptions `json:"preferredVirtualGPUOptions,omitempty"`
	// PreferredSoundModel for devices.sound.model.
	// +optional
	PreferredSoundModel string `json:"preferredSoundModel,omitempty"`
	// PreferredUseVirtioTransitional for devices.useVirtioTransitional.
	// +optional
	PreferredUseVirtioTransitional *bool `json:"preferredUseVirtioTransitional,omitempty"`
	// PreferredInputBus for the inputs' bus.
	// +optional
	PreferredInputBus v1.InputBus `json:"preferredInputBus,omitempty"`
	// PreferredInputType for the inputs' type.
	// +optional
	PreferredInputType v1.InputType `json:"preferredInputType,omitempty"`
	// PreferredDiskBus for the bus of disks.
	// +optional
	PreferredDiskBus v1.DiskBus `json:"preferredDiskBus,omitempty"`
	// PreferredLunBus for the bus of LUNs.
	// +optional
	PreferredLunBus v1.DiskBus `json:"preferredLunBus,omitempty"`
	// PreferredCdromBus for the bus of CD-ROMs.
	// +optional
	PreferredCdromBus v1.DiskBus `json:"preferredCdromBus,omitempty"`
	// PreferredDiskDedicatedIoThread for the dedicatedIOThread of virtio disks.
	// +optional
	PreferredDiskDedicatedIoThread *bool `json:"preferredDiskDedicatedIoThread,omitempty"`
	// PreferredDiskCache for the disks' cache.
	// +optional
	PreferredDiskCache v1.DriverCache `json:"preferredDiskCache,omitempty"`
	// PreferredDiskIO for the disks' io.
	// +optional
	PreferredDiskIO v1.DriverIO `json:"preferredDiskIO,omitempty"`
	// PreferredDiskBlockSize for the disks' blockSize.
	// +optional
	PreferredDiskBlockSize *v1.BlockSize `json:"preferredDiskBlockSize,omitempty"`
	// PreferredInterfaceModel for the interfaces' model.
	// +optional
	PreferredInterfaceModel string `json:"preferredInterfaceModel,omitempty"`
	// PreferredRng for devices.rng.
	// +optional
	PreferredRng *v1.Rng `json:"preferredRng,omitempty"`
	// PreferredBlockMultiQueue for devices.blockMultiQueue.
	// +optional
	PreferredBlockMultiQueue *bool `json:"preferredBlockMultiQueue,omitempty"`
	// PreferredNetworkInterfaceMultiQueue for devices.networkInterfaceMultiqueue.
	// +optional
	PreferredNetworkInterfaceMultiQueue *bool `json:"preferredNetworkInterfaceMultiQueue,omitempty"`
	// PreferredTPM for devices.tpm.
	// +optional
	PreferredTPM *v1.TPMDevice `json:"preferredTPM,omitempty"`
	// PreferredInterfaceMasquerade binds pod-network interfaces that name no
	// binding with masquerade.
	// +optional
	PreferredInterfaceMasquerade *v1.InterfaceMasquerade `json:"preferredInterfaceMasquerade,omitempty"`
	// PreferredPanicDeviceModel for the panic devices' model.
	// +optional
	PreferredPanicDeviceModel *v1.PanicDeviceModel `json:"preferredPanicDeviceModel,omitempty"`
	// PreferredVideoType for devices.video.type.
	// +optional
	PreferredVideoType *string `json:"preferredVideoType,omitempty"`
}

// FeaturePreferences are preferences for the guest's features.
type FeaturePreferences struct {
	// PreferredAcpi for features.acpi.
	// +optional
	PreferredAcpi *v1.FeatureState `json:"preferredAcpi,omitempty"`
	// PreferredApic for features.apic.
	// +optional
	PreferredApic *v1.FeatureAPIC `json:"preferredApic,omitempty"`
	// PreferredHyperv for each of features.hyperv's enlightenments.
	// +optional
	PreferredHyperv *v1.FeatureHyperv `json:"preferredHyperv,omitempty"`
	// PreferredKvm for features.kvm.
	// +optional
	PreferredKvm *v1.FeatureKVM `json:"preferredKvm,omitempty"`
	// PreferredPvspinlock for features.pvspinlock.
	// +optional
	PreferredPvspinlock *v1.FeatureState `json:"preferredPvspinlock,omitempty"`
	// PreferredSmm for features.smm.
	// +optional
	PreferredSmm *v1.FeatureState `json:"preferredSmm,omitempty"`
}

// FirmwarePreferences are preferences for the guest's firmware.
type FirmwarePreferences struct {
	// PreferredUseBios boots with BIOS when the template names no bootloader.
	// +optional
	PreferredUseBios *bool `json:"preferredUseBios,omitempty"`
	// PreferredUseBiosSerial for the BIOS's useSerial.
	// +optional
	PreferredUseBiosSerial *bool `json:"preferredUseBiosSerial,omitempty"`
	// DeprecatedPreferredUseEfi boots with EFI when the template names no
	// bootloader. Deprecated: use preferredEfi.
	// +optional
	DeprecatedPreferredUseEfi *bool `json:"preferredUseEfi,omitempty"`
	// DeprecatedPreferredUseSecureBoot for EFI's secureBoot. Deprecated: use
	// preferredEfi.
	// +optional
	DeprecatedPreferredUseSecureBoot *bool `json:"preferredUseSecureBoot,omitempty"`
	// PreferredEfi is the EFI bootloader used when the template names no
	// bootloader.
	// +optional
	PreferredEfi *v1.EFI `json:"preferredEfi,omitempty"`
}

// MachinePreferences are preferences for the guest's machine.
type MachinePreferences struct {
	// PreferredMachineType for domain.machine.type.
	// +optional
	PreferredMachineType string `json:"preferredMachineType,omitempty"`
}

// ClockPreferences are preferences for the guest's clock.
type ClockPreferences struct {
	// PreferredClockOffset is the clock offset used when the template sets
	// neither utc nor timezone.
	// +optional
	PreferredClockOffset *v1.ClockOffset `json:"preferredClockOffset,omitempty"`
	// PreferredTimer is the timer used when the template sets none.
	// +optional
	PreferredTimer *v1.Timer `json:"preferredTimer,omitempty"`
}

// PreferenceRequirements are the least a VM must give a guest for a
// preference to suit it.
type PreferenceRequirements struct {
	// CPU is the least number of vCPUs.
	// +optional
	CPU *CPUPreferenceRequirement `json:"cpu,omitempty"`
	// Memory is the least guest memory.
	// +optional
	Memory *MemoryPreferenceRequirement `json:"memory,omitempty"`
	// Architecture the VM must have.
	// +optional
	Architecture *string `json:"architecture,omitempty"`
}

// CPUPreferenceRequirement is the least number of vCPUs.
type CPUPreferenceRequirement struct {
	// Guest is the least number of vCPUs.
	Guest uint32 `json:"guest"`
}

// MemoryPreferenceRequirement is the least guest memory.
type MemoryPreferenceRequirement struct {
	// Guest is the least guest memory.
	Guest resource.Quantity `json:"guest"`
}
