package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachineInstance is a running virtual machine: one guest on one node,
// carried by one launcher pod.
//
// As in KubeVirt, the VirtualMachineInstance has no status subresource: the
// controllers and the node agent write status together with the labels that
// go with it (the node name) in one Update, and KubeVirt's own components,
// which patch a VMI's status through the main resource, keep working.
//
// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstances,singular=virtualmachineinstance,shortName=vmi;vmis,categories=all
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=".status.interfaces[0].ipAddress"
// +kubebuilder:printcolumn:name="NodeName",type=string,JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Live-Migratable",type=string,JSONPath=".status.conditions[?(@.type=='LiveMigratable')].status",priority=1
// +kubebuilder:printcolumn:name="Paused",type=string,JSONPath=".status.conditions[?(@.type=='Paused')].status",priority=1
type VirtualMachineInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired guest.
	Spec VirtualMachineInstanceSpec `json:"spec"`
	// Status is the observed state of the guest.
	// +optional
	Status VirtualMachineInstanceStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceList is a list of VirtualMachineInstances.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstance `json:"items"`
}

// EvictionStrategy says what happens to a VMI when its node is drained.
//
// +kubebuilder:validation:Enum=None;LiveMigrate;LiveMigrateIfPossible;External
type EvictionStrategy string

// Eviction strategies.
const (
	EvictionStrategyNone                  EvictionStrategy = "None"
	EvictionStrategyLiveMigrate           EvictionStrategy = "LiveMigrate"
	EvictionStrategyLiveMigrateIfPossible EvictionStrategy = "LiveMigrateIfPossible"
	EvictionStrategyExternal              EvictionStrategy = "External"
)

// StartStrategy says how the guest starts once its domain is defined.
//
// +kubebuilder:validation:Enum=Paused
type StartStrategy string

// StartStrategyPaused starts the guest paused.
const StartStrategyPaused StartStrategy = "Paused"

// VirtualMachineInstanceSpec is the desired guest: its domain, the volumes
// backing its disks, the networks behind its interfaces, and its placement.
//
// +kubebuilder:validation:XValidation:rule="!has(self.domain.devices.disks) || self.domain.devices.disks.all(d, has(self.volumes) && self.volumes.exists(v, v.name == d.name))",message="every disk must name a volume in spec.volumes",fieldPath=".domain.devices.disks",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.domain.devices.interfaces) || self.domain.devices.interfaces.all(i, has(self.networks) && self.networks.exists(n, n.name == i.name))",message="every interface must name a network in spec.networks",fieldPath=".domain.devices.interfaces",reason=FieldValueInvalid
type VirtualMachineInstanceSpec struct {
	// PriorityClassName is the priority class of the launcher pod.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Domain is the virtual hardware of the guest.
	Domain DomainSpec `json:"domain"`
	// NodeSelector must match a node's labels for the VMI to be scheduled there.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity holds the launcher pod's scheduling constraints.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// SchedulerName is the scheduler that places the launcher pod.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// Tolerations of the launcher pod.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// TopologySpreadConstraints of the launcher pod.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// EvictionStrategy says what happens when the node is drained; the
	// cluster-wide default applies when unset.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`
	// StartStrategy Paused starts the guest paused.
	// +optional
	StartStrategy *StartStrategy `json:"startStrategy,omitempty"`
	// TerminationGracePeriodSeconds is how long the guest gets to shut down
	// after an ACPI power-off before it is destroyed.
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// Volumes back the disks in domain.devices.disks by name.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(v, self.exists_one(w, w.name == v.name))",message="volume names must be unique"
	Volumes []Volume `json:"volumes,omitempty"`
	// Hostname of the guest; the VMI's name when unset.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// Subdomain makes the guest's FQDN <hostname>.<subdomain>.<namespace>.svc.
	// +optional
	Subdomain string `json:"subdomain,omitempty"`
	// Networks back the interfaces in domain.devices.interfaces by name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(n, self.exists_one(m, m.name == n.name))",message="network names must be unique"
	Networks []Network `json:"networks,omitempty"`
	// DNSPolicy of the launcher pod.
	// +optional
	DNSPolicy corev1.DNSPolicy `json:"dnsPolicy,omitempty"`
	// DNSConfig of the launcher pod.
	// +optional
	DNSConfig *corev1.PodDNSConfig `json:"dnsConfig,omitempty"`
	// Architecture of the guest (amd64, arm64, s390x); the cluster default when unset.
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// AccessCredentials put SSH keys or user passwords from secrets into
	// the guest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	AccessCredentials []AccessCredential `json:"accessCredentials,omitempty"`
	// LivenessProbe fails the VMI when the guest stops answering.
	// +optional
	LivenessProbe *Probe `json:"livenessProbe,omitempty"`
	// ReadinessProbe says when the guest is ready for traffic (the Ready
	// condition, and so Services' endpoints).
	// +optional
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
	// ResourceClaims are dynamic-resource-allocation claims of the
	// launcher pod, which gpus and hostDevices may name.
	// +optional
	// +listType=map
	// +listMapKey=name
	ResourceClaims []corev1.PodResourceClaim `json:"resourceClaims,omitempty"`
	// UtilityVolumes are claims attached to the launcher for tools
	// (memory dumps, backups), not to the guest.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	UtilityVolumes []UtilityVolume `json:"utilityVolumes,omitempty"`
}

// DomainSpec is the virtual hardware of a guest.
type DomainSpec struct {
	// Resources requested for the guest and its launcher pod.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// CPU topology and model.
	// +optional
	CPU *CPU `json:"cpu,omitempty"`
	// Memory visible to the guest and its backing.
	// +optional
	Memory *Memory `json:"memory,omitempty"`
	// Machine type emulated for the guest.
	// +optional
	Machine *Machine `json:"machine,omitempty"`
	// Firmware of the guest.
	// +optional
	Firmware *Firmware `json:"firmware,omitempty"`
	// Clock of the guest.
	// +optional
	Clock *Clock `json:"clock,omitempty"`
	// Features of the guest (ACPI, APIC, SMM, ...).
	// +optional
	Features *Features `json:"features,omitempty"`
	// Devices attached to the guest.
	Devices Devices `json:"devices"`
	// IOThreadsPolicy controls how disk I/O threads are allocated.
	// +optional
	IOThreadsPolicy *IOThreadsPolicy `json:"ioThreadsPolicy,omitempty"`
	// IOThreads sizes the supplementalPool I/O thread policy.
	// +optional
	IOThreads *DiskIOThreads `json:"ioThreads,omitempty"`
	// LaunchSecurity asks for a confidential guest (AMD SEV, SEV-SNP, Intel
	// TDX). Accepted; vmkit does not launch confidential guests yet.
	// +optional
	LaunchSecurity *LaunchSecurity `json:"launchSecurity,omitempty"`
	// Chassis is the SMBIOS chassis information of the guest.
	// +optional
	Chassis *Chassis `json:"chassis,omitempty"`
	// RebootPolicy is what a reboot from inside the guest does: Reboot
	// (the guest restarts in the same VMI) or Terminate (the VMI ends, as
	// a shutdown); Reboot when unset.
	// +optional
	// +kubebuilder:validation:Enum=Reboot;Terminate
	RebootPolicy *RebootPolicy `json:"rebootPolicy,omitempty"`
}

// IOThreadsPolicy controls how disk I/O threads are allocated.
//
// +kubebuilder:validation:Enum=shared;auto;supplementalPool
type IOThreadsPolicy string

// I/O thread policies.
const (
	IOThreadsPolicyShared IOThreadsPolicy = "shared"
	IOThreadsPolicyAuto   IOThreadsPolicy = "auto"
)

// ResourceRequirements are the resources of a guest.
type ResourceRequirements struct {
	// Requests are the minimum resources of the launcher pod; memory is also
	// the guest memory when domain.memory.guest is unset.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits are the maximum resources of the launcher pod.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// OvercommitGuestOverhead leaves the launcher's memory overhead out of the
	// pod's memory request.
	// +optional
	OvercommitGuestOverhead bool `json:"overcommitGuestOverhead,omitempty"`
}

// CPU is the virtual CPU topology and model of a guest.
type CPU struct {
	// Cores per socket; 1 when unset.
	// +optional
	Cores uint32 `json:"cores,omitempty"`
	// Sockets; 1 when unset.
	// +optional
	Sockets uint32 `json:"sockets,omitempty"`
	// MaxSockets bounds CPU hotplug.
	// +optional
	MaxSockets uint32 `json:"maxSockets,omitempty"`
	// Threads per core; 1 when unset.
	// +optional
	Threads uint32 `json:"threads,omitempty"`
	// Model is host-model, host-passthrough or a named libvirt CPU model.
	// +optional
	Model string `json:"model,omitempty"`
	// Features adds or removes CPU features from the model.
	// +optional
	Features []CPUFeature `json:"features,omitempty"`
	// DedicatedCPUPlacement pins each vCPU to a dedicated host CPU; the
	// launcher pod then gets Guaranteed QoS.
	// +optional
	DedicatedCPUPlacement bool `json:"dedicatedCpuPlacement,omitempty"`
	// NUMA configures the guest's NUMA topology.
	// +optional
	NUMA *NUMA `json:"numa,omitempty"`
	// IsolateEmulatorThread gives QEMU's emulator thread its own host CPU.
	// +optional
	IsolateEmulatorThread bool `json:"isolateEmulatorThread,omitempty"`
	// Realtime tunes the guest for low latency.
	// +optional
	Realtime *Realtime `json:"realtime,omitempty"`
}

// CPUFeature adds or removes one CPU feature.
type CPUFeature struct {
	// Name of the feature, as libvirt knows it.
	Name string `json:"name"`
	// Policy is force, require, optional, disable or forbid; require when unset.
	// +optional
	// +kubebuilder:validation:Enum=force;require;optional;disable;forbid
	Policy string `json:"policy,omitempty"`
}

// Memory is the memory of a guest.
type Memory struct {
	// Guest is the memory the guest sees; resources.requests.memory when unset.
	// +optional
	Guest *resource.Quantity `json:"guest,omitempty"`
	// Hugepages backs guest memory with huge pages.
	// +optional
	Hugepages *Hugepages `json:"hugepages,omitempty"`
	// MaxGuest bounds memory hotplug.
	// +optional
	MaxGuest *resource.Quantity `json:"maxGuest,omitempty"`
	// ReservedOverhead adjusts the memory the launcher reserves beyond
	// the guest's.
	// +optional
	ReservedOverhead *ReservedOverhead `json:"reservedOverhead,omitempty"`
}

// Hugepages backs guest memory with huge pages of one size.
type Hugepages struct {
	// PageSize is the huge page size, for example 2Mi or 1Gi.
	// +optional
	PageSize string `json:"pageSize,omitempty"`
}

// Machine is the emulated machine type.
type Machine struct {
	// Type is the QEMU machine type, for example q35.
	// +optional
	Type string `json:"type"`
}

// Firmware is the firmware of a guest.
type Firmware struct {
	// UUID is the guest's SMBIOS UUID; derived from the VMI when unset.
	// +optional
	UUID types.UID `json:"uuid,omitempty"`
	// Bootloader selects BIOS or EFI.
	// +optional
	Bootloader *Bootloader `json:"bootloader,omitempty"`
	// Serial is the guest's SMBIOS serial number.
	// +optional
	Serial string `json:"serial,omitempty"`
	// KernelBoot boots a kernel and initrd directly.
	// +optional
	KernelBoot *KernelBoot `json:"kernelBoot,omitempty"`
	// ACPI adds ACPI tables from secrets.
	// +optional
	ACPI *ACPI `json:"acpi,omitempty"`
}

// Bootloader selects BIOS or EFI; BIOS when unset.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.bios) && has(self.efi))",message="bootloader.bios and bootloader.efi are mutually exclusive"
type Bootloader struct {
	// BIOS boots with SeaBIOS.
	// +optional
	BIOS *BIOS `json:"bios,omitempty"`
	// EFI boots with OVMF.
	// +optional
	EFI *EFI `json:"efi,omitempty"`
}

// BIOS configures SeaBIOS.
type BIOS struct {
	// UseSerial sends BIOS output to the serial console.
	// +optional
	UseSerial *bool `json:"useSerial,omitempty"`
}

// EFI configures OVMF.
type EFI struct {
	// SecureBoot enables secure boot. Off when unset in vmkit (KubeVirt turns
	// it on when unset; set it explicitly to behave the same on both).
	// +optional
	SecureBoot *bool `json:"secureBoot,omitempty"`
	// Persistent keeps the NVRAM across restarts.
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// KernelBoot boots a kernel and initrd directly, without a bootloader.
type KernelBoot struct {
	// KernelArgs is the kernel command line.
	// +optional
	KernelArgs string `json:"kernelArgs,omitempty"`
	// Container is the image holding the kernel and initrd.
	// +optional
	Container *KernelBootContainer `json:"container,omitempty"`
}

// KernelBootContainer is an image holding a kernel and initrd.
//
// +kubebuilder:validation:XValidation:rule="has(self.kernelPath) || has(self.initrdPath)",message="kernelBoot.container needs kernelPath or initrdPath"
type KernelBootContainer struct {
	// Image holding the kernel and initrd.
	Image string `json:"image"`
	// ImagePullSecret for the image.
	// +optional
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// KernelPath is the kernel's path inside the image.
	// +optional
	KernelPath string `json:"kernelPath,omitempty"`
	// InitrdPath is the initrd's path inside the image.
	// +optional
	InitrdPath string `json:"initrdPath,omitempty"`
	// ImagePullPolicy for the image.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// Clock is the guest's clock: an offset and timers.
type Clock struct {
	ClockOffset `json:",inline"`
	// Timer configures the guest's timers.
	// +optional
	Timer *Timer `json:"timer,omitempty"`
}

// ClockOffset is UTC with an offset or a named time zone.
type ClockOffset struct {
	// UTC keeps the guest clock in UTC, plus an offset.
	// +optional
	UTC *ClockOffsetUTC `json:"utc,omitempty"`
	// Timezone keeps the guest clock in a named time zone.
	// +optional
	Timezone *ClockOffsetTimezone `json:"timezone,omitempty"`
}

// ClockOffsetUTC is UTC plus an offset.
type ClockOffsetUTC struct {
	// OffsetSeconds added to UTC.
	// +optional
	OffsetSeconds *int `json:"offsetSeconds,omitempty"`
}

// ClockOffsetTimezone is a time zone name such as Europe/Berlin.
type ClockOffsetTimezone string

// Timer configures the guest's timers.
type Timer struct {
	// HPET timer.
	// +optional
	HPET *HPETTimer `json:"hpet,omitempty"`
	// KVM paravirtual clock.
	// +optional
	KVM *KVMTimer `json:"kvm,omitempty"`
	// PIT timer.
	// +optional
	PIT *PITTimer `json:"pit,omitempty"`
	// RTC timer.
	// +optional
	RTC *RTCTimer `json:"rtc,omitempty"`
	// Hyperv is the Hyper-V reference clock, for Windows guests.
	// +optional
	Hyperv *HypervTimer `json:"hyperv,omitempty"`
}

// HPETTimer configures the HPET.
type HPETTimer struct {
	// TickPolicy is delay, catchup, merge or discard.
	// +optional
	TickPolicy string `json:"tickPolicy,omitempty"`
	// Enabled turns the timer on or off; on when unset.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// KVMTimer configures the KVM paravirtual clock.
type KVMTimer struct {
	// Enabled turns the timer on or off; on when unset.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// PITTimer configures the PIT.
type PITTimer struct {
	// TickPolicy is delay, catchup or discard.
	// +optional
	TickPolicy string `json:"tickPolicy,omitempty"`
	// Enabled turns the timer on or off; on when unset.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// RTCTimer configures the RTC.
type RTCTimer struct {
	// TickPolicy is delay or catchup.
	// +optional
	TickPolicy string `json:"tickPolicy,omitempty"`
	// Enabled turns the timer on or off; on when unset.
	// +optional
	Enabled *bool `json:"present,omitempty"`
	// Track is guest or wall.
	// +optional
	Track string `json:"track,omitempty"`
}

// Features are optional platform features of the guest.
type Features struct {
	// ACPI is on unless explicitly disabled.
	// +optional
	ACPI FeatureState `json:"acpi,omitempty"`
	// APIC enables the local APIC.
	// +optional
	APIC *FeatureAPIC `json:"apic,omitempty"`
	// SMM enables System Management Mode (needed for EFI secure boot).
	// +optional
	SMM *FeatureState `json:"smm,omitempty"`
	// KVM hides or shows the KVM signature.
	// +optional
	KVM *FeatureKVM `json:"kvm,omitempty"`
	// Pvspinlock enables paravirtual spinlocks.
	// +optional
	Pvspinlock *FeatureState `json:"pvspinlock,omitempty"`
	// Hyperv enables Hyper-V enlightenments for Windows guests.
	// +optional
	Hyperv *FeatureHyperv `json:"hyperv,omitempty"`
	// HypervPassthrough turns on every Hyper-V enlightenment the host
	// offers; it excludes hyperv.
	// +optional
	HypervPassthrough *HyperVPassthrough `json:"hypervPassthrough,omitempty"`
}

// FeatureState turns a feature on or off; on when Enabled is unset.
type FeatureState struct {
	// Enabled turns the feature on or off.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// FeatureAPIC configures the APIC.
type FeatureAPIC struct {
	// Enabled turns the feature on or off.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// EndOfInterrupt enables paravirtual EOI.
	// +optional
	EndOfInterrupt bool `json:"endOfInterrupt,omitempty"`
}

// FeatureKVM configures KVM signature exposure.
type FeatureKVM struct {
	// Hidden hides the KVM signature from the guest.
	// +optional
	Hidden bool `json:"hidden,omitempty"`
}

// Devices are the devices attached to a guest.
type Devices struct {
	// UseVirtioTransitional uses virtio-transitional devices for old guests.
	// +optional
	UseVirtioTransitional *bool `json:"useVirtioTransitional,omitempty"`
	// DisableHotplug turns off disk hotplug.
	// +optional
	DisableHotplug bool `json:"disableHotplug,omitempty"`
	// Disks of the guest, each backed by the volume of the same name.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(d, self.exists_one(e, e.name == d.name))",message="disk names must be unique"
	Disks []Disk `json:"disks,omitempty"`
	// Watchdog device.
	// +optional
	Watchdog *Watchdog `json:"watchdog,omitempty"`
	// Interfaces of the guest, each backed by the network of the same name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(i, self.exists_one(j, j.name == i.name))",message="interface names must be unique"
	Interfaces []Interface `json:"interfaces,omitempty"`
	// Inputs such as a USB tablet.
	// +optional
	Inputs []Input `json:"inputs,omitempty"`
	// AutoattachPodInterface adds a pod-network interface when no interface
	// is listed; on when unset.
	// +optional
	AutoattachPodInterface *bool `json:"autoattachPodInterface,omitempty"`
	// AutoattachGraphicsDevice adds VNC graphics and a video device; on when unset.
	// +optional
	AutoattachGraphicsDevice *bool `json:"autoattachGraphicsDevice,omitempty"`
	// AutoattachSerialConsole adds a serial console; on when unset.
	// +optional
	AutoattachSerialConsole *bool `json:"autoattachSerialConsole,omitempty"`
	// AutoattachMemBalloon adds a memory balloon; on when unset.
	// +optional
	AutoattachMemBalloon *bool `json:"autoattachMemBalloon,omitempty"`
	// AutoattachInputDevice adds a tablet input; off when unset.
	// +optional
	AutoattachInputDevice *bool `json:"autoattachInputDevice,omitempty"`
	// Rng attaches a virtio random number generator.
	// +optional
	Rng *Rng `json:"rng,omitempty"`
	// BlockMultiQueue gives virtio disks one queue per vCPU.
	// +optional
	BlockMultiQueue *bool `json:"blockMultiQueue,omitempty"`
	// NetworkInterfaceMultiQueue gives virtio interfaces one queue per vCPU.
	// +optional
	NetworkInterfaceMultiQueue *bool `json:"networkInterfaceMultiqueue,omitempty"`
	// GPUs passed through to the guest from a device plugin.
	// +optional
	// +listType=atomic
	GPUs []GPU `json:"gpus,omitempty"`
	// PanicDevices signal a guest crash to the host.
	// +optional
	PanicDevices []PanicDevice `json:"panicDevices,omitempty"`
	// HostDevices passed through to the guest from a device plugin.
	// +optional
	// +listType=atomic
	HostDevices []HostDevice `json:"hostDevices,omitempty"`
	// Sound is an emulated sound card.
	// +optional
	Sound *SoundDevice `json:"sound,omitempty"`
	// TPM is an emulated TPM.
	// +optional
	TPM *TPMDevice `json:"tpm,omitempty"`
	// Video is the video device of the guest's graphics.
	// +optional
	Video *VideoDevice `json:"video,omitempty"`
	// AutoattachVSOCK adds a VSOCK device with a cluster-unique CID
	// (status.VSOCKCID).
	// +optional
	AutoattachVSOCK *bool `json:"autoattachVSOCK,omitempty"`
	// LogSerialConsole keeps the serial console's output in a log
	// container of the launcher pod; the cluster default when unset.
	// +optional
	LogSerialConsole *bool `json:"logSerialConsole,omitempty"`
	// Filesystems share volumes with the guest as file systems
	// (virtiofs).
	// +optional
	// +listType=atomic
	Filesystems []Filesystem `json:"filesystems,omitempty"`
	// ClientPassthrough lets a client pass its USB devices to the guest.
	// +optional
	ClientPassthrough *ClientPassthroughDevices `json:"clientPassthrough,omitempty"`
	// DownwardMetrics adds a virtio-serial port serving host metrics.
	// +optional
	DownwardMetrics *DownwardMetrics `json:"downwardMetrics,omitempty"`
}

// Rng is a virtio random number generator fed from the host.
type Rng struct{}

// Disk is one disk of a guest, backed by the volume of the same name.
//
// +kubebuilder:validation:XValidation:rule="[has(self.disk), has(self.lun), has(self.cdrom)].filter(x, x).size() <= 1",messageExpression="'disk ' + self.name + ' may set only one of disk, lun and cdrom'"
type Disk struct {
	// Name of the disk; a volume of the same name backs it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	Name       string `json:"name"`
	DiskDevice `json:",inline"`
	// BootOrder is the disk's place in the boot order (1 first); unique
	// across disks and interfaces.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BootOrder *uint `json:"bootOrder,omitempty"`
	// Serial is the disk's serial number.
	// +optional
	Serial string `json:"serial,omitempty"`
	// DedicatedIOThread gives the disk its own I/O thread.
	// +optional
	DedicatedIOThread *bool `json:"dedicatedIOThread,omitempty"`
	// Cache is the host cache mode: none, writethrough or writeback.
	// +optional
	Cache DriverCache `json:"cache,omitempty"`
	// IO is the I/O mode: native or threads.
	// +optional
	IO DriverIO `json:"io,omitempty"`
	// Tag is passed to the guest through device metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
	// BlockSize is the logical and physical block size the guest sees.
	// +optional
	BlockSize *BlockSize `json:"blockSize,omitempty"`
	// Shareable lets several guests attach the disk.
	// +optional
	Shareable *bool `json:"shareable,omitempty"`
	// ErrorPolicy is what the guest sees on an I/O error: stop (pause
	// the guest), ignore, report, or enospace (report only out-of-space);
	// stop when unset.
	// +optional
	// +kubebuilder:validation:Enum=stop;ignore;report;enospace
	ErrorPolicy *DiskErrorPolicy `json:"errorPolicy,omitempty"`
	// ChangedBlockTracking turns changed-block tracking (incremental
	// backups) on for this disk.
	// +optional
	ChangedBlockTracking *bool `json:"changedBlockTracking,omitempty"`
}

// DiskDevice says how a disk is exposed: as a disk, a LUN or a CD-ROM.
// A disk when none is set.
type DiskDevice struct {
	// Disk exposes the volume as a disk.
	// +optional
	Disk *DiskTarget `json:"disk,omitempty"`
	// LUN exposes the volume as a SCSI LUN.
	// +optional
	LUN *LunTarget `json:"lun,omitempty"`
	// CDRom exposes the volume as a read-only CD-ROM.
	// +optional
	CDRom *CDRomTarget `json:"cdrom,omitempty"`
}

// DiskBus is the bus a disk is attached to.
//
// +kubebuilder:validation:Enum=virtio;sata;scsi;usb
type DiskBus string

// Disk buses.
const (
	DiskBusVirtio DiskBus = "virtio"
	DiskBusSATA   DiskBus = "sata"
	DiskBusSCSI   DiskBus = "scsi"
	DiskBusUSB    DiskBus = "usb"
)

// DriverCache is a disk's host cache mode.
//
// +kubebuilder:validation:Enum=none;writethrough;writeback
type DriverCache string

// Disk cache modes.
const (
	CacheNone         DriverCache = "none"
	CacheWriteThrough DriverCache = "writethrough"
	CacheWriteBack    DriverCache = "writeback"
)

// DriverIO is a disk's I/O mode.
//
// +kubebuilder:validation:Enum=native;threads
type DriverIO string

// Disk I/O modes.
const (
	IONative  DriverIO = "native"
	IOThreads DriverIO = "threads"
)

// DiskTarget exposes a volume as a disk.
type DiskTarget struct {
	// Bus is virtio, sata, scsi or usb; virtio when unset.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly attaches the disk read-only.
	// +optional
	ReadOnly bool `json:"readonly,omitempty"`
	// PciAddress places the disk at a PCI address (virtio only).
	// +optional
	PciAddress string `json:"pciAddress,omitempty"`
}

// LunTarget exposes a volume as a SCSI LUN.
type LunTarget struct {
	// Bus is scsi when unset.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly attaches the LUN read-only.
	// +optional
	ReadOnly bool `json:"readonly,omitempty"`
	// Reservation enables SCSI persistent reservations.
	// +optional
	Reservation bool `json:"reservation,omitempty"`
}

// TrayState is open or closed.
//
// +kubebuilder:validation:Enum=open;closed
type TrayState string

// Tray states.
const (
	TrayStateOpen   TrayState = "open"
	TrayStateClosed TrayState = "closed"
)

// CDRomTarget exposes a volume as a CD-ROM.
type CDRomTarget struct {
	// Bus is sata when unset.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly is true when unset.
	// +optional
	ReadOnly *bool `json:"readonly,omitempty"`
	// Tray is closed when unset.
	// +optional
	Tray TrayState `json:"tray,omitempty"`
}

// Watchdog is a watchdog device.
type Watchdog struct {
	// Name of the watchdog.
	Name           string `json:"name"`
	WatchdogDevice `json:",inline"`
}

// WatchdogDevice is the watchdog model.
type WatchdogDevice struct {
	// I6300ESB is an Intel 6300ESB watchdog.
	// +optional
	I6300ESB *I6300ESBWatchdog `json:"i6300esb,omitempty"`
	// Diag288 is s390x's diag288 watchdog.
	// +optional
	Diag288 *Diag288Watchdog `json:"diag288,omitempty"`
}

// I6300ESBWatchdog is an Intel 6300ESB watchdog.
type I6300ESBWatchdog struct {
	// Action on expiry: poweroff, reset or shutdown; reset when unset.
	// +optional
	// +kubebuilder:validation:Enum=poweroff;reset;shutdown
	Action string `json:"action,omitempty"`
}

// Input is an input device.
type Input struct {
	// Bus is usb or virtio.
	// +optional
	// +kubebuilder:validation:Enum=usb;virtio
	Bus string `json:"bus,omitempty"`
	// Type is tablet.
	// +kubebuilder:validation:Enum=tablet
	Type string `json:"type"`
	// Name of the device.
	Name string `json:"name"`
}

// Interface is one network interface of a guest, backed by the network of
// the same name.
//
// +kubebuilder:validation:XValidation:rule="[has(self.bridge), has(self.masquerade), has(self.slirp), has(self.sriov), has(self.passt), has(self.passtBinding), has(self.macvtap), has(self.binding)].filter(x, x).size() <= 1",messageExpression="'interface ' + self.name + ' may set only one binding (bridge, masquerade, slirp, sriov, passt, passtBinding, macvtap or binding)'"
type Interface struct {
	// Name of the interface; a network of the same name backs it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Model is the NIC model: virtio, e1000, e1000e, ne2k_pci, pcnet, rtl8139;
	// virtio when unset.
	// +optional
	// +kubebuilder:validation:Enum=virtio;e1000;e1000e;igb;ne2k_pci;pcnet;rtl8139
	Model                  string `json:"model,omitempty"`
	InterfaceBindingMethod `json:",inline"`
	// Ports forwarded to the guest (masquerade); all when empty.
	// +optional
	Ports []Port `json:"ports,omitempty"`
	// MacAddress of the interface.
	// +optional
	MacAddress string `json:"macAddress,omitempty"`
	// BootOrder is the interface's place in the boot order (1 first).
	// +optional
	// +kubebuilder:validation:Minimum=1
	BootOrder *uint `json:"bootOrder,omitempty"`
	// PciAddress places the interface at a PCI address.
	// +optional
	PciAddress string `json:"pciAddress,omitempty"`
	// Tag is passed to the guest through device metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
	// ACPIIndex is the interface's ACPI index (the guest names it
	// eno<index>); 1 to 16383.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16383
	ACPIIndex int `json:"acpiIndex,omitempty"`
	// DHCPOptions are extra options the DHCP server gives the guest.
	// +optional
	DHCPOptions *DHCPOptions `json:"dhcpOptions,omitempty"`
	// State of the interface: up, down (link down) or absent (to be
	// unplugged); up when unset.
	// +optional
	// +kubebuilder:validation:Enum=up;down;absent
	State InterfaceState `json:"state,omitempty"`
}

// InterfaceBindingMethod connects an interface to its network.
type InterfaceBindingMethod struct {
	// Bridge connects the guest to the pod network through a bridge; the
	// guest takes the pod's IP.
	// +optional
	Bridge *InterfaceBridge `json:"bridge,omitempty"`
	// Slirp connects through user-mode networking.
	// +optional
	Slirp *InterfaceSlirp `json:"slirp,omitempty"`
	// Masquerade connects through NAT behind the pod's IP.
	// +optional
	Masquerade *InterfaceMasquerade `json:"masquerade,omitempty"`
	// SRIOV passes through an SR-IOV virtual function.
	// +optional
	SRIOV *InterfaceSRIOV `json:"sriov,omitempty"`
	// Macvtap connects through a macvtap device.
	// +optional
	Macvtap *InterfaceMacvtap `json:"macvtap,omitempty"`
	// Passt connects through passt.
	// +optional
	Passt *InterfacePasst `json:"passt,omitempty"`
	// Binding names a network binding plugin.
	// +optional
	Binding *PluginBinding `json:"binding,omitempty"`
	// PasstBinding connects the guest through passt, KubeVirt's core
	// passt binding.
	// +optional
	PasstBinding *InterfacePasstBinding `json:"passtBinding,omitempty"`
}

// InterfaceBridge is the bridge binding.
type InterfaceBridge struct{}

// InterfaceSlirp is the slirp binding.
type InterfaceSlirp struct{}

// InterfaceMasquerade is the masquerade binding.
type InterfaceMasquerade struct{}

// InterfaceSRIOV is the SR-IOV binding.
type InterfaceSRIOV struct{}

// InterfaceMacvtap is the macvtap binding.
type InterfaceMacvtap struct{}

// InterfacePasst is the passt binding.
type InterfacePasst struct{}

// PluginBinding names a network binding plugin.
type PluginBinding struct {
	// Name of the plugin.
	Name string `json:"name"`
}

// Port is a port forwarded to the guest.
type Port struct {
	// Name of the port.
	// +optional
	Name string `json:"name,omitempty"`
	// Protocol is TCP or UDP; TCP when unset.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol,omitempty"`
	// Port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// Network is a network an interface connects to.
//
// +kubebuilder:validation:XValidation:rule="[has(self.pod), has(self.multus)].filter(x, x).size() == 1",messageExpression="'network ' + self.name + ' must set exactly one of pod and multus'"
type Network struct {
	// Name of the network; the interface of the same name uses it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	Name          string `json:"name"`
	NetworkSource `json:",inline"`
}

// NetworkSource is where a network comes from.
type NetworkSource struct {
	// Pod is the pod's own network.
	// +optional
	Pod *PodNetwork `json:"pod,omitempty"`
	// Multus is a secondary network attached through Multus.
	// +optional
	Multus *MultusNetwork `json:"multus,omitempty"`
}

// PodNetwork is the pod's own network.
type PodNetwork struct {
	// VMNetworkCIDR is the guest's IPv4 network behind masquerade.
	// +optional
	VMNetworkCIDR string `json:"vmNetworkCIDR,omitempty"`
	// VMIPv6NetworkCIDR is the guest's IPv6 network behind masquerade.
	// +optional
	VMIPv6NetworkCIDR string `json:"vmIPv6NetworkCIDR,omitempty"`
}

// MultusNetwork is a NetworkAttachmentDefinition attached through Multus.
type MultusNetwork struct {
	// NetworkName is <name> or <namespace>/<name> of the NetworkAttachmentDefinition.
	NetworkName string `json:"networkName"`
	// Default makes this the pod's default network.
	// +optional
	Default bool `json:"default,omitempty"`
}

// VirtualMachineInstanceStatus is the observed state of a guest.
type VirtualMachineInstanceStatus struct {
	// NodeName is the node the guest runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Reason is a short CamelCase reason for the current phase.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Conditions of the guest.
	// +optional
	Conditions []VirtualMachineInstanceCondition `json:"conditions,omitempty"`
	// Phase of the guest's life cycle.
	// +optional
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamps records when each phase was entered.
	// +optional
	PhaseTransitionTimestamps []VirtualMachineInstancePhaseTransitionTimestamp `json:"phaseTransitionTimestamps,omitempty"`
	// Interfaces are the guest's network interfaces as observed.
	// +optional
	Interfaces []VirtualMachineInstanceNetworkInterface `json:"interfaces,omitempty"`
	// GuestOSInfo is what the guest agent reports about the guest OS.
	// +optional
	GuestOSInfo VirtualMachineInstanceGuestOSInfo `json:"guestOSInfo,omitempty"`
	// MigrationState is the state of the latest migration.
	// +optional
	MigrationState *VirtualMachineInstanceMigrationState `json:"migrationState,omitempty"`
	// MigrationMethod is BlockMigration or LiveMigration.
	// +optional
	MigrationMethod VirtualMachineInstanceMigrationMethod `json:"migrationMethod,omitempty"`
	// QOSClass is the QoS class of the launcher pod.
	// +optional
	QOSClass *corev1.PodQOSClass `json:"qosClass,omitempty"`
	// LauncherContainerImageVersion is the launcher image the guest runs in.
	// +optional
	LauncherContainerImageVersion string `json:"launcherContainerImageVersion,omitempty"`
	// EvacuationNodeName is set when the guest must leave that node.
	// +optional
	EvacuationNodeName string `json:"evacuationNodeName,omitempty"`
	// ActivePods maps each launcher pod's UID to its node.
	// +optional
	ActivePods map[types.UID]string `json:"activePods,omitempty"`
	// VolumeStatus reports each volume's state.
	// +optional
	VolumeStatus []VolumeStatus `json:"volumeStatus,omitempty"`
	// Machine is the machine type the guest actually runs with.
	// +optional
	Machine *Machine `json:"machine,omitempty"`
	// CurrentCPUTopology is the guest's CPU topology now (CPU hotplug).
	// +optional
	CurrentCPUTopology *CPUTopology `json:"currentCPUTopology,omitempty"`
	// Memory is the guest's memory as booted, requested and current.
	// +optional
	Memory *MemoryStatus `json:"memory,omitempty"`
	// FSFreezeStatus is "frozen" while the guest's file systems are
	// frozen (for a snapshot).
	// +optional
	FSFreezeStatus string `json:"fsFreezeStatus,omitempty"`
	// KernelBootStatus is what the launcher found of a direct kernel boot.
	// +optional
	KernelBootStatus *KernelBootStatus `json:"kernelBootStatus,omitempty"`
	// TopologyHints are facts of the node a migration target must match.
	// +optional
	TopologyHints *TopologyHints `json:"topologyHints,omitempty"`
	// RuntimeUser is the UID the launcher runs as (107 when non-root).
	// +optional
	RuntimeUser uint64 `json:"runtimeUser,omitempty"`
	// VSOCKCID is the guest's VSOCK context ID (autoattachVSOCK).
	// +optional
	VSOCKCID *uint32 `json:"VSOCKCID,omitempty"`
	// SELinuxContext of the launcher.
	// +optional
	SELinuxContext string `json:"selinuxContext,omitempty"`
	// MigrationTransport is how migration traffic flows (Unix: through a
	// proxy over a socket).
	// +optional
	MigrationTransport string `json:"migrationTransport,omitempty"`
	// VirtualMachineRevisionName is the ControllerRevision of the VM spec
	// this VMI was started from.
	// +optional
	VirtualMachineRevisionName string `json:"virtualMachineRevisionName,omitempty"`
	// MigratedVolumes are the volumes a storage migration moves.
	// +optional
	// +listType=atomic
	MigratedVolumes []StorageMigratedVolumeInfo `json:"migratedVolumes,omitempty"`
	// ChangedBlockTracking is the state of changed-block tracking.
	// +optional
	ChangedBlockTracking *ChangedBlockTrackingStatus `json:"changedBlockTracking,omitempty"`
}

// VirtualMachineInstancePhase is a phase of a guest's life cycle.
//
// +kubebuilder:validation:Enum="";Pending;Scheduling;Scheduled;Running;Succeeded;Failed;Unknown
type VirtualMachineInstancePhase string

// VMI phases.
const (
	// VmPhaseUnset is the phase of a VMI no controller has seen yet.
	VmPhaseUnset VirtualMachineInstancePhase = ""
	// Pending: the VMI is accepted; no launcher pod exists yet.
	Pending VirtualMachineInstancePhase = "Pending"
	// Scheduling: the launcher pod exists but is not running on a node yet.
	Scheduling VirtualMachineInstancePhase = "Scheduling"
	// Scheduled: the launcher pod runs on a node; the guest is not running yet.
	Scheduled VirtualMachineInstancePhase = "Scheduled"
	// Running: the guest runs.
	Running VirtualMachineInstancePhase = "Running"
	// Succeeded: the guest shut down. Final.
	Succeeded VirtualMachineInstancePhase = "Succeeded"
	// Failed: the guest or its launcher failed. Final.
	Failed VirtualMachineInstancePhase = "Failed"
	// Unknown: the guest's state cannot be observed.
	Unknown VirtualMachineInstancePhase = "Unknown"
)

// VirtualMachineInstancePhaseTransitionTimestamp records when a phase was entered.
type VirtualMachineInstancePhaseTransitionTimestamp struct {
	// Phase entered.
	// +optional
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamp is when it was entered.
	// +optional
	// +nullable
	PhaseTransitionTimestamp metav1.Time `json:"phaseTransitionTimestamp,omitempty"`
}

// VirtualMachineInstanceConditionType is the type of a VMI condition.
type VirtualMachineInstanceConditionType string

// VMI condition types.
const (
	// VirtualMachineInstanceReady: the guest runs and its readiness probes pass.
	VirtualMachineInstanceReady VirtualMachineInstanceConditionType = "Ready"
	// VirtualMachineInstanceProvisioning: volumes are still being provisioned.
	VirtualMachineInstanceProvisioning VirtualMachineInstanceConditionType = "Provisioning"
	// VirtualMachineInstancePaused: the guest is paused.
	VirtualMachineInstancePaused VirtualMachineInstanceConditionType = "Paused"
	// VirtualMachineInstanceIsMigratable: the guest can be live-migrated.
	VirtualMachineInstanceIsMigratable VirtualMachineInstanceConditionType = "LiveMigratable"
	// VirtualMachineInstanceAgentConnected: the guest agent is connected.
	VirtualMachineInstanceAgentConnected VirtualMachineInstanceConditionType = "AgentConnected"
	// VirtualMachineInstanceSynchronized: the node agent applied the spec
	// (False with a reason when it could not).
	VirtualMachineInstanceSynchronized VirtualMachineInstanceConditionType = "Synchronized"
	// VirtualMachineInstancePodScheduled mirrors the launcher pod's PodScheduled condition.
	VirtualMachineInstancePodScheduled VirtualMachineInstanceConditionType = "PodScheduled"
	// VirtualMachineInstanceAccessCredentialsSynchronized: the guest agent
	// put the access credentials (spec.accessCredentials propagated by
	// qemuGuestAgent) into the guest (False with the failure as message).
	VirtualMachineInstanceAccessCredentialsSynchronized VirtualMachineInstanceConditionType = "AccessCredentialsSynchronized"
	// VirtualMachineInstanceMemoryChange: memory hotplug is under way (True)
	// or failed (False, with the reason); absent when the guest has the
	// memory its spec asks for.
	VirtualMachineInstanceMemoryChange VirtualMachineInstanceConditionType = "HotMemoryChange"
)

// VirtualMachineInstanceCondition is one condition of a VMI.
type VirtualMachineInstanceCondition struct {
	// Type of the condition.
	Type VirtualMachineInstanceConditionType `json:"type"`
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

// VirtualMachineInstanceNetworkInterface is a guest interface as observed.
type VirtualMachineInstanceNetworkInterface struct {
	// IP is the primary IP address.
	// +optional
	IP string `json:"ipAddress,omitempty"`
	// MAC address.
	// +optional
	MAC string `json:"mac,omitempty"`
	// Name of the interface in the VMI spec.
	// +optional
	Name string `json:"name,omitempty"`
	// IPs are all addresses of the interface.
	// +optional
	IPs []string `json:"ipAddresses,omitempty"`
	// InterfaceName is the name inside the guest.
	// +optional
	InterfaceName string `json:"interfaceName,omitempty"`
	// InfoSource says who reported this: domain, guest-agent, multus-status.
	// +optional
	InfoSource string `json:"infoSource,omitempty"`
	// QueueCount is the number of queues of the interface.
	// +optional
	QueueCount int32 `json:"queueCount,omitempty"`
	// PodInterfaceName is the interface's name in the launcher pod.
	// +optional
	PodInterfaceName string `json:"podInterfaceName,omitempty"`
	// LinkState of the guest's interface: up or down.
	// +optional
	LinkState string `json:"linkState,omitempty"`
}

// VirtualMachineInstanceGuestOSInfo is what the guest agent reports about the OS.
type VirtualMachineInstanceGuestOSInfo struct {
	// Name of the OS.
	// +optional
	Name string `json:"name,omitempty"`
	// KernelRelease of the guest.
	// +optional
	KernelRelease string `json:"kernelRelease,omitempty"`
	// Version of the OS.
	// +optional
	Version string `json:"version,omitempty"`
	// PrettyName of the OS.
	// +optional
	PrettyName string `json:"prettyName,omitempty"`
	// VersionID of the OS.
	// +optional
	VersionID string `json:"versionId,omitempty"`
	// KernelVersion of the guest.
	// +optional
	KernelVersion string `json:"kernelVersion,omitempty"`
	// Machine architecture.
	// +optional
	Machine string `json:"machine,omitempty"`
	// ID of the OS.
	// +optional
	ID string `json:"id,omitempty"`
}

// VirtualMachineInstanceMigrationMethod is how a guest is migrated.
type VirtualMachineInstanceMigrationMethod string

// Migration methods.
const (
	BlockMigration VirtualMachineInstanceMigrationMethod = "BlockMigration"
	LiveMigration  VirtualMachineInstanceMigrationMethod = "LiveMigration"
)

// VirtualMachineInstanceMigrationState is the state of a VMI's latest migration.
type VirtualMachineInstanceMigrationState struct {
	// SourceState is the sending side of the migration.
	// +optional
	SourceState *VirtualMachineInstanceMigrationSourceState `json:"sourceState,omitempty"`
	// TargetState is the receiving side of the migration.
	// +optional
	TargetState *VirtualMachineInstanceMigrationTargetState `json:"targetState,omitempty"`
	// AbortStatus is the state of an abort: Succeeded, Failed or
	// Aborting.
	// +optional
	AbortStatus MigrationAbortStatus `json:"abortStatus,omitempty"`
	// MigrationPolicyName is the MigrationPolicy applied.
	// +optional
	MigrationPolicyName *string `json:"migrationPolicyName,omitempty"`
	// MigrationNetworkType is the network migration traffic used (pod or
	// a dedicated migration network).
	// +optional
	MigrationNetworkType string `json:"migrationNetworkType,omitempty"`
	// TargetCPUSet is the receiving launcher's dedicated CPUs (superseded
	// upstream by targetState.cpuSet).
	// +optional
	// +listType=atomic
	TargetCPUSet []int `json:"targetCPUSet,omitempty"`
	// TargetNodeTopology is the receiving node's topology, JSON
	// (superseded upstream by targetState.nodeTopology).
	// +optional
	TargetNodeTopology string `json:"targetNodeTopology,omitempty"`
	// TargetAttachmentPodUID is the receiving side's hotplug attachment
	// pod (superseded upstream by targetState.attachmentPodUID).
	// +optional
	TargetAttachmentPodUID types.UID `json:"targetAttachmentPodUID,omitempty"`
	// TargetMemoryOverhead is the receiving launcher's memory overhead.
	// +optional
	TargetMemoryOverhead *resource.Quantity `json:"targetMemoryOverhead,omitempty"`
	// SourcePersistentStatePVCName is the persistent-state claim on the
	// sending side (superseded upstream by sourceState).
	// +optional
	SourcePersistentStatePVCName string `json:"sourcePersistentStatePVCName,omitempty"`
	// TargetPersistentStatePVCName is the persistent-state claim on the
	// receiving side (superseded upstream by targetState).
	// +optional
	TargetPersistentStatePVCName string `json:"targetPersistentStatePVCName,omitempty"`
	// StartTimestamp is when the migration started.
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the migration ended.
	// +optional
	// +nullable
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// TargetNodeDomainDetected: the target node sees the domain.
	// +optional
	TargetNodeDomainDetected bool `json:"targetNodeDomainDetected,omitempty"`
	// TargetNodeDomainReadyTimestamp is when the target domain became ready.
	// +optional
	TargetNodeDomainReadyTimestamp *metav1.Time `json:"targetNodeDomainReadyTimestamp,omitempty"`
	// TargetNodeAddress is the address the source migrates to.
	// +optional
	TargetNodeAddress string `json:"targetNodeAddress,omitempty"`
	// TargetDirectMigrationNodePorts maps target ports to what they carry.
	// +optional
	TargetDirectMigrationNodePorts map[string]int `json:"targetDirectMigrationNodePorts,omitempty"`
	// TargetNode is the node migrated to.
	// +optional
	TargetNode string `json:"targetNode,omitempty"`
	// TargetPod is the launcher pod migrated to.
	// +optional
	TargetPod string `json:"targetPod,omitempty"`
	// SourceNode is the node migrated from.
	// +optional
	SourceNode string `json:"sourceNode,omitempty"`
	// SourcePod is the launcher pod migrated from.
	// +optional
	SourcePod string `json:"sourcePod,omitempty"`
	// Completed: the migration finished.
	// +optional
	Completed bool `json:"completed,omitempty"`
	// Failed: the migration failed.
	// +optional
	Failed bool `json:"failed,omitempty"`
	// AbortRequested: someone asked to abort.
	// +optional
	AbortRequested bool `json:"abortRequested,omitempty"`
	// MigrationUID is the UID of the VirtualMachineInstanceMigration.
	// +optional
	MigrationUID types.UID `json:"migrationUid,omitempty"`
	// Mode is PreCopy or PostCopy.
	// +optional
	Mode string `json:"mode,omitempty"`
	// FailureReason says why the migration failed.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// MigrationConfiguration is the KubeVirt CR's migration configuration
	// (bandwidth, completion and progress timeouts, post-copy...) as the
	// migration controller resolved it when it handed the migration to the
	// node agents, which apply it.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrationConfiguration,omitempty"`
}

// VolumeStatus is the observed state of one volume.
type VolumeStatus struct {
	// Name of the volume.
	Name string `json:"name"`
	// Target is the guest device name (vda, sda, ...).
	Target string `json:"target"`
	// Phase of a hotplugged volume.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Reason for the phase.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message for the phase.
	// +optional
	Message string `json:"message,omitempty"`
	// Size of the volume in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// PersistentVolumeClaimInfo is what the controller read of the
	// volume's claim.
	// +optional
	PersistentVolumeClaimInfo *PersistentVolumeClaimInfo `json:"persistentVolumeClaimInfo,omitempty"`
	// HotplugVolume is the attachment pod of a hotplugged volume.
	// +optional
	HotplugVolume *HotplugVolumeStatus `json:"hotplugVolume,omitempty"`
	// MemoryDumpVolume is the state of a memory dump volume.
	// +optional
	MemoryDumpVolume *DomainMemoryDumpInfo `json:"memoryDumpVolume,omitempty"`
	// ContainerDiskVolume is the container disk's checksum.
	// +optional
	ContainerDiskVolume *ContainerDiskInfo `json:"containerDiskVolume,omitempty"`
}
