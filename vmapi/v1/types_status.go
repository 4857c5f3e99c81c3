package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds status types KubeVirt's components write (hotplug,
// memory dumps, backups, storage migration, CPU and memory hotplug). vmkit
// keeps them in the schema so that KubeVirt objects and tools round-trip;
// which of them vmkit's own components fill in is in
// docs/api-compatibility.md.

// CPUTopology is the guest's current CPU topology.
type CPUTopology struct {
	// Cores per socket.
	// +optional
	Cores uint32 `json:"cores,omitempty"`
	// Sockets.
	// +optional
	Sockets uint32 `json:"sockets,omitempty"`
	// Threads per core.
	// +optional
	Threads uint32 `json:"threads,omitempty"`
}

// ChangedBlockTrackingState is the state of changed-block tracking.
type ChangedBlockTrackingState string

// ChangedBlockTrackingStatus is the state of changed-block tracking and of
// the last backup.
type ChangedBlockTrackingStatus struct {
	// State of tracking: PendingRestart, Initializing, Enabled, Disabled
	// or IncrementalBackupFeatureGateDisabled.
	State ChangedBlockTrackingState `json:"state"`
	// BackupStatus is the state of the last backup.
	// +optional
	BackupStatus *VirtualMachineInstanceBackupStatus `json:"backupStatus,omitempty"`
}

// VirtualMachineInstanceBackupStatus is the state of one backup.
type VirtualMachineInstanceBackupStatus struct {
	// BackupName names the backup.
	// +optional
	BackupName string `json:"backupName,omitempty"`
	// Completed says the backup finished.
	// +optional
	Completed bool `json:"completed,omitempty"`
	// Failed says the backup failed.
	// +optional
	Failed bool `json:"failed,omitempty"`
	// BackupMsg explains the outcome.
	// +optional
	BackupMsg *string `json:"backupMsg,omitempty"`
	// StartTimestamp is when the backup started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the backup ended.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// CheckpointName is the checkpoint the backup created.
	// +optional
	CheckpointName *string `json:"checkpointName,omitempty"`
	// Volumes backed up, with their endpoints.
	// +optional
	// +listType=atomic
	Volumes []BackupVolumeInfo `json:"volumes,omitempty"`
}

// BackupVolumeInfo is one volume of a backup.
type BackupVolumeInfo struct {
	// VolumeName of the volume.
	VolumeName string `json:"volumeName"`
	// DiskTarget is the guest disk's target.
	DiskTarget string `json:"diskTarget"`
	// DataEndpoint serves the volume's data.
	// +optional
	DataEndpoint string `json:"dataEndpoint,omitempty"`
	// MapEndpoint serves the volume's changed-block map.
	// +optional
	MapEndpoint string `json:"mapEndpoint,omitempty"`
}

// KernelBootStatus is what the launcher found of a direct kernel boot.
type KernelBootStatus struct {
	// KernelInfo is the kernel's.
	// +optional
	KernelInfo *KernelInfo `json:"kernelInfo,omitempty"`
	// InitrdInfo is the initrd's.
	// +optional
	InitrdInfo *InitrdInfo `json:"initrdInfo,omitempty"`
}

// KernelInfo is a kernel's checksum.
type KernelInfo struct {
	// Checksum (CRC32) of the kernel image.
	// +optional
	Checksum uint32 `json:"checksum,omitempty"`
}

// InitrdInfo is an initrd's checksum.
type InitrdInfo struct {
	// Checksum (CRC32) of the initrd.
	// +optional
	Checksum uint32 `json:"checksum,omitempty"`
}

// ContainerDiskInfo is a container disk's checksum.
type ContainerDiskInfo struct {
	// Checksum (CRC32) of the disk image.
	// +optional
	Checksum uint32 `json:"checksum,omitempty"`
}

// MemoryStatus is the guest's memory as booted, requested and current.
type MemoryStatus struct {
	// GuestAtBoot is the memory the guest booted with.
	// +optional
	GuestAtBoot *resource.Quantity `json:"guestAtBoot,omitempty"`
	// GuestCurrent is the memory the guest has now.
	// +optional
	GuestCurrent *resource.Quantity `json:"guestCurrent,omitempty"`
	// GuestRequested is the memory last asked for (memory hotplug).
	// +optional
	GuestRequested *resource.Quantity `json:"guestRequested,omitempty"`
	// MemoryOverhead is the launcher's memory beyond the guest's.
	// +optional
	MemoryOverhead *resource.Quantity `json:"memoryOverhead,omitempty"`
}

// TopologyHints are facts of the node a migration target must match.
type TopologyHints struct {
	// TSCFrequency of the node the guest started on.
	// +optional
	TSCFrequency *int64 `json:"tscFrequency,omitempty"`
}

// StorageMigratedVolumeInfo is one volume moved by a storage migration.
type StorageMigratedVolumeInfo struct {
	// VolumeName of the volume.
	VolumeName string `json:"volumeName"`
	// SourcePVCInfo is the claim migrated from.
	// +optional
	SourcePVCInfo *PersistentVolumeClaimInfo `json:"sourcePVCInfo,omitempty"`
	// DestinationPVCInfo is the claim migrated to.
	// +optional
	DestinationPVCInfo *PersistentVolumeClaimInfo `json:"destinationPVCInfo,omitempty"`
}

// PersistentVolumeClaimInfo is what the controller read of a claim.
type PersistentVolumeClaimInfo struct {
	// ClaimName of the claim.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// AccessModes of the claim.
	// +optional
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// VolumeMode of the claim.
	// +optional
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`
	// Capacity of the bound volume.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Requests of the claim.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Preallocated says the volume's space is allocated up front.
	// +optional
	Preallocated bool `json:"preallocated,omitempty"`
	// FilesystemOverhead is the share of a file-system volume not usable
	// by the disk image, as a decimal string ("0.055").
	// +optional
	FilesystemOverhead *string `json:"filesystemOverhead,omitempty"`
}

// HotplugVolumeStatus is the attachment pod of a hotplugged volume.
type HotplugVolumeStatus struct {
	// AttachPodName is the pod holding the volume.
	// +optional
	AttachPodName string `json:"attachPodName,omitempty"`
	// AttachPodUID is that pod's UID.
	// +optional
	AttachPodUID types.UID `json:"attachPodUID,omitempty"`
}

// DomainMemoryDumpInfo is the state of a memory dump volume.
type DomainMemoryDumpInfo struct {
	// StartTimestamp is when the dump started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the dump ended.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// ClaimName is the claim dumped into.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// TargetFileName is the dump's file name on the claim.
	// +optional
	TargetFileName string `json:"targetFileName,omitempty"`
}

// MemoryDumpPhase is the phase of a memory dump request.
type MemoryDumpPhase string

// VirtualMachineMemoryDumpRequest is a memory dump asked for on a VM
// (virtctl memory-dump).
type VirtualMachineMemoryDumpRequest struct {
	// ClaimName is the claim to dump into.
	ClaimName string `json:"claimName"`
	// Phase of the request: InProgress, Completed, Unmounting,
	// Dissociating, Failed or Removing.
	Phase MemoryDumpPhase `json:"phase"`
	// Remove asks to remove the dump's association with the VM.
	// +optional
	Remove bool `json:"remove,omitempty"`
	// StartTimestamp is when the dump started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the dump ended.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// FileName of the dump on the claim.
	// +optional
	FileName *string `json:"fileName,omitempty"`
	// Message explains a failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// VirtualMachineVolumeRequest is a pending hotplug (add or remove) of a
// volume on a VM; exactly one member is set.
type VirtualMachineVolumeRequest struct {
	// AddVolumeOptions adds a volume.
	// +optional
	AddVolumeOptions *AddVolumeOptions `json:"addVolumeOptions,omitempty"`
	// RemoveVolumeOptions removes a volume.
	// +optional
	RemoveVolumeOptions *RemoveVolumeOptions `json:"removeVolumeOptions,omitempty"`
}

// AddVolumeOptions is a volume to hotplug and the disk it becomes.
type AddVolumeOptions struct {
	// Name of the volume.
	Name string `json:"name"`
	// Disk the volume becomes in the guest.
	Disk *Disk `json:"disk"`
	// VolumeSource of the volume.
	VolumeSource *HotplugVolumeSource `json:"volumeSource"`
	// DryRun, when it holds "All", checks the request without acting.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// RemoveVolumeOptions is a volume to unplug.
type RemoveVolumeOptions struct {
	// Name of the volume.
	Name string `json:"name"`
	// DryRun, when it holds "All", checks the request without acting.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// HotplugVolumeSource is what a hotplugged volume is: a claim or a data
// volume.
type HotplugVolumeSource struct {
	// PersistentVolumeClaim to attach.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// DataVolume to attach.
	// +optional
	DataVolume *DataVolumeSource `json:"dataVolume,omitempty"`
}

// VolumeSnapshotStatus says whether a volume can be snapshotted.
type VolumeSnapshotStatus struct {
	// Name of the volume.
	Name string `json:"name"`
	// Enabled says the volume can be snapshotted.
	Enabled bool `json:"enabled"`
	// Reason it cannot.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// VolumeUpdateState is the state of a change of a VM's volumes.
type VolumeUpdateState struct {
	// VolumeMigrationState is the state of a storage migration.
	// +optional
	VolumeMigrationState *VolumeMigrationState `json:"volumeMigrationState,omitempty"`
}

// VolumeMigrationState lists the volumes a storage migration moves.
type VolumeMigrationState struct {
	// MigratedVolumes moved by the migration.
	// +optional
	// +listType=atomic
	MigratedVolumes []StorageMigratedVolumeInfo `json:"migratedVolumes,omitempty"`
}

// DataVolumeTemplateDummyStatus is the status of a data volume template,
// which has none: it is in the schema because KubeVirt's is.
type DataVolumeTemplateDummyStatus struct{}
