package v1beta1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names and defaults KubeVirt gives the export kind.
const (
	VirtualMachineExportKind = "VirtualMachineExport"
	// App is the value of the kubevirt.io label on export server pods.
	App = "virt-exporter"
	// DefaultDurationTTL is the lifetime of an export without
	// spec.ttlDuration.
	DefaultDurationTTL = 2 * time.Hour
	// TokenHeader is the HTTP header (or query parameter) that carries the
	// export's token.
	TokenHeader = "x-kubevirt-export-token"
	// TokenSecretKey is the key of the token in the token Secret.
	TokenSecretKey = "token"
)

// VirtualMachineExport makes a VM's disks or a claim downloadable.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachineexports,singular=virtualmachineexport,scope=Namespaced,shortName=vmexport;vmexports,categories=all
// +kubebuilder:printcolumn:name="SourceKind",type=string,JSONPath=".spec.source.kind"
// +kubebuilder:printcolumn:name="SourceName",type=string,JSONPath=".spec.source.name"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
type VirtualMachineExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec names the source, the token and the lifetime; it cannot change
	// (KubeVirt's admission refuses it too).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable after creation"
	Spec VirtualMachineExportSpec `json:"spec"`
	// Status is the export's phase and download links.
	// +optional
	Status *VirtualMachineExportStatus `json:"status,omitempty"`
}

// VirtualMachineExportList is a list of VirtualMachineExports.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	// +listType=atomic
	Items []VirtualMachineExport `json:"items"`
}

// VirtualMachineExportSpec is what to export and for how long.
type VirtualMachineExportSpec struct {
	// Source is the VirtualMachine (kubevirt.io), PersistentVolumeClaim
	// (core) or VirtualMachineSnapshot (snapshot.kubevirt.io) to export.
	// +kubebuilder:validation:XValidation:rule="self.name != ''",message="spec.source.name must not be empty"
	// +kubebuilder:validation:XValidation:rule="self.kind in ['VirtualMachine', 'PersistentVolumeClaim', 'VirtualMachineSnapshot']",message="spec.source.kind: invalid kind: want VirtualMachine, PersistentVolumeClaim or VirtualMachineSnapshot"
	// +kubebuilder:validation:XValidation:rule="self.kind != 'PersistentVolumeClaim' || !has(self.apiGroup) || self.apiGroup == ''",message="spec.source.apiGroup: PVC API group must be missing or blank"
	// +kubebuilder:validation:XValidation:rule="self.kind != 'VirtualMachine' || (has(self.apiGroup) && self.apiGroup == 'kubevirt.io')",message="spec.source.apiGroup: VM API group must be kubevirt.io"
	// +kubebuilder:validation:XValidation:rule="self.kind != 'VirtualMachineSnapshot' || (has(self.apiGroup) && self.apiGroup == 'snapshot.kubevirt.io')",message="spec.source.apiGroup: VMSnapshot API group must be snapshot.kubevirt.io"
	Source corev1.TypedLocalObjectReference `json:"source"`
	// TokenSecretRef names a Secret in the export's namespace whose "token"
	// key is the download token; without it the controller creates one.
	// +optional
	TokenSecretRef *string `json:"tokenSecretRef,omitempty"`
	// TTLDuration limits the export's lifetime, counted from its creation;
	// after it the export is deleted. Two hours when unset.
	// +optional
	TTLDuration *metav1.Duration `json:"ttlDuration,omitempty"`
}

// VirtualMachineExportPhase is the phase of an export.
type VirtualMachineExportPhase string

// The phases of an export.
const (
	// Pending: the export server is not serving yet.
	Pending VirtualMachineExportPhase = "Pending"
	// Ready: the links in status can be downloaded.
	Ready VirtualMachineExportPhase = "Ready"
	// Terminated: the export server has stopped and will not serve again.
	Terminated VirtualMachineExportPhase = "Terminated"
	// Skipped: the source cannot be exported (no volumes), no server runs.
	Skipped VirtualMachineExportPhase = "Skipped"
)

// VirtualMachineExportStatus is the observed state of an export.
type VirtualMachineExportStatus struct {
	// Phase is Pending, Ready, Terminated or Skipped.
	// +optional
	Phase VirtualMachineExportPhase `json:"phase,omitempty"`
	// Links are the download URLs, inside the cluster (internal) and
	// through an Ingress (external).
	// +optional
	Links *VirtualMachineExportLinks `json:"links,omitempty"`
	// TokenSecretRef names the Secret holding the download token.
	// +optional
	TokenSecretRef *string `json:"tokenSecretRef,omitempty"`
	// TTLExpirationTime is when the export is deleted: creation + TTL.
	// +optional
	TTLExpirationTime *metav1.Time `json:"ttlExpirationTime,omitempty"`
	// ServiceName is the export server's Service, the host of the internal
	// links.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
	// VirtualMachineName is the exported VM, for VM and snapshot sources.
	// +optional
	VirtualMachineName *string `json:"virtualMachineName,omitempty"`
	// Conditions are Ready, PVCReady and VolumesCreated.
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`
}

// VirtualMachineExportLinks holds the internal and external links.
type VirtualMachineExportLinks struct {
	// Internal links reach the export Service from inside the cluster.
	// +optional
	Internal *VirtualMachineExportLink `json:"internal,omitempty"`
	// External links go through an Ingress; absent without one.
	// +optional
	External *VirtualMachineExportLink `json:"external,omitempty"`
}

// VirtualMachineExportLink is one set of links and the CA that verifies
// their server.
type VirtualMachineExportLink struct {
	// Cert is the PEM CA certificate that verifies the export server.
	Cert string `json:"cert"`
	// Volumes are the downloadable volumes.
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []VirtualMachineExportVolume `json:"volumes,omitempty"`
	// Backups are the downloadable backups (KubeVirt's VM backups; vmkit
	// has none).
	// +listType=map
	// +listMapKey=name
	// +optional
	Backups []VirtualMachineExportBackup `json:"backups,omitempty"`
	// Manifests are the URLs of the VM's manifests and of the token header
	// Secret.
	// +listType=map
	// +listMapKey=type
	// +optional
	Manifests []VirtualMachineExportManifest `json:"manifests,omitempty"`
}

// VirtualMachineExportManifest is the URL of one kind of manifest.
type VirtualMachineExportManifest struct {
	// Type is all or auth-header-secret.
	Type ExportManifestType `json:"type"`
	// Url returns the manifest.
	Url string `json:"url"`
}

// ExportManifestType is a kind of manifest an export serves.
type ExportManifestType string

// The manifest types.
const (
	// AllManifests: the VM and the CA ConfigMap.
	AllManifests ExportManifestType = "all"
	// AuthHeader: a Secret with the token as an extra HTTP header, as CDI's
	// importer takes it.
	AuthHeader ExportManifestType = "auth-header-secret"
)

// VirtualMachineExportVolume is one downloadable volume.
type VirtualMachineExportVolume struct {
	// Name is the volume's claim.
	Name string `json:"name"`
	// Formats are the URLs of each format.
	// +listType=map
	// +listMapKey=format
	// +optional
	Formats []VirtualMachineExportVolumeFormat `json:"formats,omitempty"`
}

// ExportVolumeFormat is a format a volume is served in.
type ExportVolumeFormat string

// The volume formats.
const (
	// KubeVirtRaw is the disk image, raw.
	KubeVirtRaw ExportVolumeFormat = "raw"
	// KubeVirtGz is the disk image, gzip-compressed.
	KubeVirtGz ExportVolumeFormat = "gzip"
	// Dir is the claim's root as an HTTP file listing.
	Dir ExportVolumeFormat = "dir"
	// ArchiveGz is the claim's root as a tar.gz.
	ArchiveGz ExportVolumeFormat = "tar.gz"
)

// VirtualMachineExportVolumeFormat is a format and its URL.
type VirtualMachineExportVolumeFormat struct {
	// Format is raw, gzip, dir or tar.gz.
	Format ExportVolumeFormat `json:"format"`
	// Url downloads the volume in that format.
	Url string `json:"url"`
}

// VirtualMachineExportBackup is one downloadable backup (KubeVirt's).
type VirtualMachineExportBackup struct {
	// Name is the backup's volume.
	Name string `json:"name"`
	// Endpoints are the backup's map and data URLs.
	// +listType=map
	// +listMapKey=endpoint
	// +optional
	Endpoints []VirtualMachineExportBackupEndpoint `json:"endpoints,omitempty"`
}

// ExportBackupEndpoint is a kind of backup endpoint.
type ExportBackupEndpoint string

// The backup endpoints.
const (
	// Map is the backup's dirty bitmap.
	Map ExportBackupEndpoint = "map"
	// Data is the backup's data.
	Data ExportBackupEndpoint = "data"
)

// VirtualMachineExportBackupEndpoint is a backup endpoint and its URL.
type VirtualMachineExportBackupEndpoint struct {
	// Endpoint is map or data.
	Endpoint ExportBackupEndpoint `json:"endpoint"`
	// Url serves it.
	Url string `json:"url"`
}

// ConditionType is the type of an export condition.
type ConditionType string

// The condition types.
const (
	// ConditionReady: the export server serves the links.
	ConditionReady ConditionType = "Ready"
	// ConditionPVC: the exported claims are bound.
	ConditionPVC ConditionType = "PVCReady"
	// ConditionVolumesCreated: claims restored from a snapshot exist.
	ConditionVolumesCreated ConditionType = "VolumesCreated"
)

// Condition is one export condition.
type Condition struct {
	// Type is Ready, PVCReady or VolumesCreated.
	Type ConditionType `json:"type"`
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
	// Reason is a CamelCase word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says more.
	// +optional
	Message string `json:"message,omitempty"`
}
