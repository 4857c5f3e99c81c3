package v1

import "k8s.io/apimachinery/pkg/api/resource"

// ACPI names secrets whose contents become ACPI tables of the guest.
type ACPI struct {
	// SLICNameRef names a volume (a secret) holding the SLIC table.
	// +optional
	SLICNameRef string `json:"slicNameRef,omitempty"`
	// MSDMNameRef names a volume (a secret) holding the MSDM table.
	// +optional
	MSDMNameRef string `json:"msdmNameRef,omitempty"`
}

// Chassis is the SMBIOS chassis information the guest sees.
type Chassis struct {
	// Manufacturer of the chassis.
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// Version of the chassis.
	// +optional
	Version string `json:"version,omitempty"`
	// Serial number of the chassis.
	// +optional
	Serial string `json:"serial,omitempty"`
	// Asset tag of the chassis.
	// +optional
	Asset string `json:"asset,omitempty"`
	// SKU of the chassis.
	// +optional
	SKU string `json:"sku,omitempty"`
}

// ClientPassthroughDevices passes a client's USB devices (through
// virtctl usbredir) to the guest; it has no settings.
type ClientPassthroughDevices struct{}

// DHCPOptions are extra options the DHCP server gives the guest on one
// interface.
type DHCPOptions struct {
	// BootFileName is the boot file name (option 67).
	// +optional
	BootFileName string `json:"bootFileName,omitempty"`
	// TFTPServerName is the TFTP server's name (option 66).
	// +optional
	TFTPServerName string `json:"tftpServerName,omitempty"`
	// NTPServers (option 42).
	// +optional
	NTPServers []string `json:"ntpServers,omitempty"`
	// PrivateOptions are site-specific options (224 to 254).
	// +optional
	PrivateOptions []DHCPPrivateOptions `json:"privateOptions,omitempty"`
}

// DHCPPrivateOptions is one site-specific DHCP option.
type DHCPPrivateOptions struct {
	// Option number, 224 to 254.
	// +kubebuilder:validation:Minimum=224
	// +kubebuilder:validation:Maximum=254
	Option int32 `json:"option"`
	// Value of the option.
	Value string `json:"value"`
}

// Diag288Watchdog is s390x's diag288 watchdog.
type Diag288Watchdog struct {
	// Action when the watchdog fires: poweroff, reset or shutdown;
	// reset when unset.
	// +optional
	Action string `json:"action,omitempty"`
}

// DownwardMetrics adds a virtio-serial port on which the guest reads host
// metrics (vm-dump-metrics); it has no settings.
type DownwardMetrics struct{}

// Filesystem shares a volume with the guest as a file system rather than
// a disk.
type Filesystem struct {
	// Name of the volume in spec.volumes; the guest mounts it by this tag.
	Name string `json:"name"`
	// Virtiofs shares the volume with virtiofsd.
	Virtiofs FilesystemVirtiofs `json:"virtiofs"`
}

// FilesystemVirtiofs selects virtiofs; it has no settings.
type FilesystemVirtiofs struct{}

// HyperVPassthrough turns on every Hyper-V enlightenment the host offers,
// instead of listing them under features.hyperv.
type HyperVPassthrough struct {
	// Enabled turns passthrough on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// InterfacePasstBinding selects the passt binding (the core binding that
// replaced the passt plugin); it has no settings.
type InterfacePasstBinding struct{}

// ReservedOverhead adjusts the memory the launcher reserves beyond the
// guest's.
type ReservedOverhead struct {
	// AddedOverhead is memory added to the computed overhead.
	// +optional
	AddedOverhead *resource.Quantity `json:"addedOverhead,omitempty"`
	// MemLock says whether guest memory and its overhead must be locked
	// (a device such as VFIO needs it): Required or NotRequired.
	// +optional
	// +kubebuilder:validation:Enum=NotRequired;Required
	MemLock string `json:"memLock,omitempty"`
}

// UtilityVolumeType is what a utility volume is for.
//
// +kubebuilder:validation:Enum=MemoryDump;Backup
type UtilityVolumeType string

// Utility volume types.
const (
	UtilityVolumeMemoryDump UtilityVolumeType = "MemoryDump"
	UtilityVolumeBackup     UtilityVolumeType = "Backup"
)

// UtilityVolume is a claim attached to the launcher for a tool (a memory
// dump, a backup), not to the guest.
type UtilityVolume struct {
	// Name of the utility volume, unique among the VMI's volumes.
	Name string `json:"name"`
	// ClaimName is the PersistentVolumeClaim attached.
	ClaimName string `json:"claimName"`
	// Type is what the volume is for.
	// +optional
	Type *UtilityVolumeType `json:"type,omitempty"`
	// ReadOnly attaches the claim read-only.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// ContainerPathVolumeSource shares a path of the launcher's compute
// container (where a projected token or another mount lives) with the
// guest, through virtiofs.
type ContainerPathVolumeSource struct {
	// Path inside the compute container.
	Path string `json:"path"`
	// ReadOnly shares the path read-only; true when unset.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// DownwardMetricsVolumeSource is a disk from which the guest reads host
// metrics; it has no settings.
type DownwardMetricsVolumeSource struct{}

// MemoryDumpVolumeSource is a claim the guest's memory is dumped into.
type MemoryDumpVolumeSource struct {
	// ClaimName is the PersistentVolumeClaim.
	ClaimName string `json:"claimName"`
	// ReadOnly attaches the claim read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
	// Hotpluggable attaches the claim to a running guest.
	// +optional
	Hotpluggable bool `json:"hotpluggable,omitempty"`
}

// DiskErrorPolicy is what the guest sees on a disk I/O error.
type DiskErrorPolicy string

// Disk error policies.
const (
	DiskErrorPolicyStop     DiskErrorPolicy = "stop"
	DiskErrorPolicyIgnore   DiskErrorPolicy = "ignore"
	DiskErrorPolicyReport   DiskErrorPolicy = "report"
	DiskErrorPolicyEnospace DiskErrorPolicy = "enospace"
)

// RebootPolicy is what a reboot from inside the guest does.
type RebootPolicy string

// Reboot policies.
const (
	// RebootPolicyReboot restarts the guest in the same VMI.
	RebootPolicyReboot RebootPolicy = "Reboot"
	// RebootPolicyTerminate ends the VMI, as a shutdown does.
	RebootPolicyTerminate RebootPolicy = "Terminate"
)

// InterfaceState is the requested state of an interface.
type InterfaceState string

// Interface states.
const (
	InterfaceStateLinkUp   InterfaceState = "up"
	InterfaceStateLinkDown InterfaceState = "down"
	InterfaceStateAbsent   InterfaceState = "absent"
)

// UpdateVolumesStrategy is how a change of a VM's volumes reaches its
// running VMI.
type UpdateVolumesStrategy string

// Volume update strategies.
const (
	UpdateVolumesStrategyReplacement UpdateVolumesStrategy = "Replacement"
	UpdateVolumesStrategyMigration   UpdateVolumesStrategy = "Migration"
)
