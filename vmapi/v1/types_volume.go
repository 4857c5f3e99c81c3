package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Volume is a named source of data for the disk of the same name.
//
// +kubebuilder:validation:XValidation:rule="[has(self.containerDisk), has(self.persistentVolumeClaim), has(self.dataVolume), has(self.emptyDisk), has(self.hostDisk), has(self.cloudInitNoCloud), has(self.cloudInitConfigDrive), has(self.configMap), has(self.secret), has(self.serviceAccount), has(self.ephemeral), has(self.downwardAPI), has(self.sysprep), has(self.memoryDump), has(self.downwardMetrics), has(self.containerPath)].filter(x, x).size() == 1",messageExpression="'volume ' + self.name + ' must set exactly one source (containerDisk, persistentVolumeClaim, dataVolume, emptyDisk, hostDisk, cloudInitNoCloud, cloudInitConfigDrive, configMap, secret, serviceAccount, ...)'"
type Volume struct {
	// Name of the volume; the disk of the same name uses it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	Name         string `json:"name"`
	VolumeSource `json:",inline"`
}

// VolumeSource is where a volume's data comes from. Exactly one field is set.
type VolumeSource struct {
	// HostDisk is a disk image file on the node.
	// +optional
	HostDisk *HostDisk `json:"hostDisk,omitempty"`
	// PersistentVolumeClaim attaches a PVC.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// CloudInitNoCloud provides cloud-init NoCloud user and network data.
	// +optional
	CloudInitNoCloud *CloudInitNoCloudSource `json:"cloudInitNoCloud,omitempty"`
	// CloudInitConfigDrive provides cloud-init ConfigDrive user and network data.
	// +optional
	CloudInitConfigDrive *CloudInitConfigDriveSource `json:"cloudInitConfigDrive,omitempty"`
	// Sysprep provides a Windows answer file.
	// +optional
	Sysprep *SysprepSource `json:"sysprep,omitempty"`
	// ContainerDisk is a disk image shipped in a container image; ephemeral.
	// +optional
	ContainerDisk *ContainerDiskSource `json:"containerDisk,omitempty"`
	// Ephemeral is a copy-on-write overlay over a PVC, discarded on stop.
	// +optional
	Ephemeral *EphemeralVolumeSource `json:"ephemeral,omitempty"`
	// EmptyDisk is a sparse, ephemeral disk of the given capacity.
	// +optional
	EmptyDisk *EmptyDiskSource `json:"emptyDisk,omitempty"`
	// DataVolume attaches the PVC of a CDI DataVolume.
	// +optional
	DataVolume *DataVolumeSource `json:"dataVolume,omitempty"`
	// ConfigMap exposes a ConfigMap as a disk.
	// +optional
	ConfigMap *ConfigMapVolumeSource `json:"configMap,omitempty"`
	// Secret exposes a Secret as a disk.
	// +optional
	Secret *SecretVolumeSource `json:"secret,omitempty"`
	// DownwardAPI exposes pod fields as a disk.
	// +optional
	DownwardAPI *DownwardAPIVolumeSource `json:"downwardAPI,omitempty"`
	// ServiceAccount exposes a service account's token as a disk.
	// +optional
	ServiceAccount *ServiceAccountVolumeSource `json:"serviceAccount,omitempty"`
	// MemoryDump is a claim the guest's memory is dumped into.
	// +optional
	MemoryDump *MemoryDumpVolumeSource `json:"memoryDump,omitempty"`
	// DownwardMetrics is a disk from which the guest reads host metrics.
	// +optional
	DownwardMetrics *DownwardMetricsVolumeSource `json:"downwardMetrics,omitempty"`
	// ContainerPath shares a path of the compute container with the guest.
	// +optional
	ContainerPath *ContainerPathVolumeSource `json:"containerPath,omitempty"`
}

// HostDiskType says whether a host disk must exist.
//
// +kubebuilder:validation:Enum=Disk;DiskOrCreate
type HostDiskType string

// Host disk types.
const (
	// HostDiskExists uses an existing image file.
	HostDiskExists HostDiskType = "Disk"
	// HostDiskExistsOrCreateEmpty creates a sparse image of the given capacity if missing.
	HostDiskExistsOrCreateEmpty HostDiskType = "DiskOrCreate"
)

// HostDisk is a disk image file on the node.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'DiskOrCreate' || has(self.capacity)",message="hostDisk of type DiskOrCreate needs a capacity"
type HostDisk struct {
	// Path of the image file on the node.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// Type is Disk (must exist) or DiskOrCreate.
	Type HostDiskType `json:"type"`
	// Capacity of an image created by DiskOrCreate.
	// +optional
	Capacity resource.Quantity `json:"capacity,omitempty"`
	// Shared marks the disk as shared between nodes (enables migration).
	// +optional
	Shared *bool `json:"shared,omitempty"`
}

// PersistentVolumeClaimVolumeSource attaches a PVC.
type PersistentVolumeClaimVolumeSource struct {
	corev1.PersistentVolumeClaimVolumeSource `json:",inline"`
	// Hotpluggable marks the volume as hotplugged.
	// +optional
	Hotpluggable bool `json:"hotpluggable,omitempty"`
}

// CloudInitNoCloudSource is cloud-init NoCloud data: user data and network
// data, inline, base64 or from a Secret.
//
// +kubebuilder:validation:XValidation:rule="[has(self.userData), has(self.userDataBase64), has(self.secretRef)].filter(x, x).size() <= 1",message="cloudInitNoCloud may set only one of userData, userDataBase64 and secretRef"
type CloudInitNoCloudSource struct {
	// UserDataSecretRef names a Secret holding the user data under key userdata or userData.
	// +optional
	UserDataSecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// UserDataBase64 is the user data, base64-encoded.
	// +optional
	UserDataBase64 string `json:"userDataBase64,omitempty"`
	// UserData is the user data, inline.
	// +optional
	UserData string `json:"userData,omitempty"`
	// NetworkDataSecretRef names a Secret holding the network data under key networkdata or networkData.
	// +optional
	NetworkDataSecretRef *corev1.LocalObjectReference `json:"networkDataSecretRef,omitempty"`
	// NetworkDataBase64 is the network data, base64-encoded.
	// +optional
	NetworkDataBase64 string `json:"networkDataBase64,omitempty"`
	// NetworkData is the network data, inline.
	// +optional
	NetworkData string `json:"networkData,omitempty"`
}

// CloudInitConfigDriveSource is cloud-init ConfigDrive data; same fields as NoCloud.
//
// +kubebuilder:validation:XValidation:rule="[has(self.userData), has(self.userDataBase64), has(self.secretRef)].filter(x, x).size() <= 1",message="cloudInitConfigDrive may set only one of userData, userDataBase64 and secretRef"
type CloudInitConfigDriveSource struct {
	// UserDataSecretRef names a Secret holding the user data.
	// +optional
	UserDataSecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// UserDataBase64 is the user data, base64-encoded.
	// +optional
	UserDataBase64 string `json:"userDataBase64,omitempty"`
	// UserData is the user data, inline.
	// +optional
	UserData string `json:"userData,omitempty"`
	// NetworkDataSecretRef names a Secret holding the network data.
	// +optional
	NetworkDataSecretRef *corev1.LocalObjectReference `json:"networkDataSecretRef,omitempty"`
	// NetworkDataBase64 is the network data, base64-encoded.
	// +optional
	NetworkDataBase64 string `json:"networkDataBase64,omitempty"`
	// NetworkData is the network data, inline.
	// +optional
	NetworkData string `json:"networkData,omitempty"`
}

// SysprepSource is a Windows answer file from a Secret or ConfigMap.
type SysprepSource struct {
	// Secret holding the answer file.
	// +optional
	Secret *corev1.LocalObjectReference `json:"secret,omitempty"`
	// ConfigMap holding the answer file.
	// +optional
	ConfigMap *corev1.LocalObjectReference `json:"configMap,omitempty"`
}

// ContainerDiskSource is a disk image shipped in a container image.
type ContainerDiskSource struct {
	// Image holding the disk under /disk (or Path).
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// ImagePullSecret for the image.
	// +optional
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// Path of the disk image inside the container image.
	// +optional
	Path string `json:"path,omitempty"`
	// ImagePullPolicy for the image.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// EphemeralVolumeSource is a copy-on-write overlay over a PVC.
type EphemeralVolumeSource struct {
	// PersistentVolumeClaim is the read-only base.
	// +optional
	PersistentVolumeClaim *corev1.PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
}

// EmptyDiskSource is a sparse, ephemeral disk.
type EmptyDiskSource struct {
	// Capacity of the disk.
	Capacity resource.Quantity `json:"capacity"`
}

// DataVolumeSource attaches the PVC of a CDI DataVolume.
type DataVolumeSource struct {
	// Name of the DataVolume in the VMI's namespace.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Hotpluggable marks the volume as hotplugged.
	// +optional
	Hotpluggable bool `json:"hotpluggable,omitempty"`
}

// ConfigMapVolumeSource exposes a ConfigMap as a disk.
type ConfigMapVolumeSource struct {
	corev1.LocalObjectReference `json:",inline"`
	// Optional lets the guest start without the ConfigMap.
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// VolumeLabel is the filesystem label of the disk.
	// +optional
	VolumeLabel string `json:"volumeLabel,omitempty"`
}

// SecretVolumeSource exposes a Secret as a disk.
type SecretVolumeSource struct {
	// SecretName in the VMI's namespace.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// Optional lets the guest start without the Secret.
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// VolumeLabel is the filesystem label of the disk.
	// +optional
	VolumeLabel string `json:"volumeLabel,omitempty"`
}

// DownwardAPIVolumeSource exposes pod fields as a disk.
type DownwardAPIVolumeSource struct {
	// Fields to expose.
	// +optional
	Fields []corev1.DownwardAPIVolumeFile `json:"fields,omitempty"`
	// VolumeLabel is the filesystem label of the disk.
	// +optional
	VolumeLabel string `json:"volumeLabel,omitempty"`
}

// ServiceAccountVolumeSource exposes a service account's token as a disk.
type ServiceAccountVolumeSource struct {
	// ServiceAccountName in the VMI's namespace.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}
