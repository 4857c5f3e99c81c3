package v1

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the parts of the KubeVirt CR's spec.configuration and
// of its spec and status beyond the ones vmkit's operator and controllers
// act on. They are accepted with KubeVirt's names and shapes, so a
// KubeVirt CR applies unchanged; docs/api-compatibility.md says which of
// them vmkit honours.

// ArchConfiguration holds per-architecture defaults.
type ArchConfiguration struct {
	// Amd64 defaults.
	// +optional
	Amd64 *ArchSpecificConfiguration `json:"amd64,omitempty"`
	// Arm64 defaults.
	// +optional
	Arm64 *ArchSpecificConfiguration `json:"arm64,omitempty"`
	// Ppc64le defaults.
	// +optional
	Ppc64le *ArchSpecificConfiguration `json:"ppc64le,omitempty"`
	// S390x defaults.
	// +optional
	S390x *ArchSpecificConfiguration `json:"s390x,omitempty"`
	// DefaultArchitecture of guests that name none.
	// +optional
	DefaultArchitecture string `json:"defaultArchitecture,omitempty"`
}

// ArchSpecificConfiguration holds one architecture's defaults.
type ArchSpecificConfiguration struct {
	// OVMFPath is the directory holding the EFI firmware.
	// +optional
	OVMFPath string `json:"ovmfPath,omitempty"`
	// EmulatedMachines are the machine types guests may ask for (globs).
	// +optional
	// +listType=atomic
	EmulatedMachines []string `json:"emulatedMachines,omitempty"`
	// MachineType is the default machine type.
	// +optional
	MachineType string `json:"machineType,omitempty"`
}

// CertConfig is the lifetime of a certificate.
type CertConfig struct {
	// Duration of a certificate.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// RenewBefore is how long before expiry a certificate is renewed.
	// +optional
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
}

// ChangedBlockTrackingSelectors pick the VMs that get changed-block
// tracking.
type ChangedBlockTrackingSelectors struct {
	// NamespaceLabelSelector picks namespaces whose VMs get it.
	// +optional
	NamespaceLabelSelector *metav1.LabelSelector `json:"namespaceLabelSelector,omitempty"`
	// VirtualMachineLabelSelector picks VMs that get it.
	// +optional
	VirtualMachineLabelSelector *metav1.LabelSelector `json:"virtualMachineLabelSelector,omitempty"`
}

// CommonInstancetypesDeployment turns the deployment of the common
// instance types and preferences on or off.
type CommonInstancetypesDeployment struct {
	// Enabled deploys them.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// VirtTemplateDeployment turns the deployment of virt-template on or off.
type VirtTemplateDeployment struct {
	// Enabled deploys it.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// CustomizeComponents changes the installed components: patches applied
// to their objects, and extra command-line flags.
type CustomizeComponents struct {
	// Patches applied to installed objects.
	// +optional
	// +listType=atomic
	Patches []CustomizeComponentsPatch `json:"patches,omitempty"`
	// Flags added to the components' command lines.
	// +optional
	Flags *Flags `json:"flags,omitempty"`
}

// CustomizeComponentsPatch is one patch of installed objects.
type CustomizeComponentsPatch struct {
	// ResourceName of the objects patched; "*" for all.
	// +kubebuilder:validation:MinLength=1
	ResourceName string `json:"resourceName"`
	// ResourceType of the objects patched (Deployment, DaemonSet, ...).
	// +kubebuilder:validation:MinLength=1
	ResourceType string `json:"resourceType"`
	// Patch in the format Type says.
	Patch string `json:"patch"`
	// Type of the patch: json, merge or strategic.
	Type string `json:"type"`
}

// Flags are extra command-line flags of the components, by flag name.
type Flags struct {
	// API flags of virt-api.
	// +optional
	API map[string]string `json:"api,omitempty"`
	// Controller flags of virt-controller.
	// +optional
	Controller map[string]string `json:"controller,omitempty"`
	// Handler flags of virt-handler.
	// +optional
	Handler map[string]string `json:"handler,omitempty"`
}

// DiskVerification bounds the memory of the disk-image checks.
type DiskVerification struct {
	// MemoryLimit of qemu-img when it inspects an image.
	MemoryLimit *resource.Quantity `json:"memoryLimit"`
}

// GenerationStatus is the generation of one installed object the
// operator last applied.
type GenerationStatus struct {
	// Group of the object.
	Group string `json:"group"`
	// Resource of the object.
	Resource string `json:"resource"`
	// Namespace of the object.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// LastGeneration applied.
	LastGeneration int64 `json:"lastGeneration"`
	// Hash of the last applied object.
	// +optional
	Hash string `json:"hash,omitempty"`
}

// HypervisorConfiguration names a hypervisor.
type HypervisorConfiguration struct {
	// Name of the hypervisor (kvm, mshv).
	// +optional
	Name string `json:"name,omitempty"`
}

// InstancetypeConfiguration configures instance-type handling.
type InstancetypeConfiguration struct {
	// ReferencePolicy: reference keeps references to ControllerRevisions,
	// expand writes the instance type into the VM, expandAll does so for
	// VMs that already have references too.
	// +optional
	// +kubebuilder:validation:Enum=reference;expand;expandAll
	ReferencePolicy *string `json:"referencePolicy,omitempty"`
}

// InterfaceBindingPlugin is a network binding plugin registered under a
// name in network.binding.
type InterfaceBindingPlugin struct {
	// SidecarImage runs beside the launcher and edits the domain.
	// +optional
	SidecarImage string `json:"sidecarImage,omitempty"`
	// NetworkAttachmentDefinition the plugin's interfaces attach to.
	// +optional
	NetworkAttachmentDefinition string `json:"networkAttachmentDefinition,omitempty"`
	// DomainAttachmentType is how the interface joins the domain (tap,
	// managedTap).
	// +optional
	DomainAttachmentType string `json:"domainAttachmentType,omitempty"`
	// Migration says how the binding behaves in a live migration.
	// +optional
	Migration *InterfaceBindingMigration `json:"migration,omitempty"`
	// DownwardAPI the plugin receives (device-info).
	// +optional
	DownwardAPI string `json:"downwardAPI,omitempty"`
	// ComputeResourceOverhead added to the launcher's compute container.
	// +optional
	ComputeResourceOverhead *ResourceRequirementsWithoutClaims `json:"computeResourceOverhead,omitempty"`
}

// InterfaceBindingMigration is a binding's migration behaviour.
type InterfaceBindingMigration struct {
	// Method: link-refresh cycles the link after a migration.
	// +optional
	Method string `json:"method,omitempty"`
}

// KSMConfiguration picks the nodes on which kernel same-page merging is
// turned on.
type KSMConfiguration struct {
	// NodeLabelSelector picks the nodes.
	// +optional
	NodeLabelSelector *metav1.LabelSelector `json:"nodeLabelSelector,omitempty"`
}

// KubeVirtCertificateRotateStrategy is how the components' certificates
// rotate.
type KubeVirtCertificateRotateStrategy struct {
	// SelfSigned rotates self-signed certificates.
	// +optional
	SelfSigned *KubeVirtSelfSignConfiguration `json:"selfSigned,omitempty"`
}

// KubeVirtSelfSignConfiguration is the lifetime of the self-signed CA and
// server certificates.
type KubeVirtSelfSignConfiguration struct {
	// CARotateInterval (deprecated upstream: use CA).
	// +optional
	CARotateInterval *metav1.Duration `json:"caRotateInterval,omitempty"`
	// CertRotateInterval (deprecated upstream: use Server).
	// +optional
	CertRotateInterval *metav1.Duration `json:"certRotateInterval,omitempty"`
	// CAOverlapInterval is how long an old CA stays trusted.
	// +optional
	CAOverlapInterval *metav1.Duration `json:"caOverlapInterval,omitempty"`
	// CA certificate lifetime.
	// +optional
	CA *CertConfig `json:"ca,omitempty"`
	// Server certificates' lifetime.
	// +optional
	Server *CertConfig `json:"server,omitempty"`
}

// WorkloadUpdateMethod is how a VMI on an old launcher is updated.
//
// +kubebuilder:validation:Enum=LiveMigrate;Evict
type WorkloadUpdateMethod string

// Workload update methods.
const (
	WorkloadUpdateMethodLiveMigrate WorkloadUpdateMethod = "LiveMigrate"
	WorkloadUpdateMethodEvict       WorkloadUpdateMethod = "Evict"
)

// KubeVirtWorkloadUpdateStrategy is how running VMIs move to a new
// launcher after an update.
type KubeVirtWorkloadUpdateStrategy struct {
	// WorkloadUpdateMethods allowed, tried in order; none leaves VMIs on
	// the old launcher.
	// +optional
	// +listType=atomic
	WorkloadUpdateMethods []WorkloadUpdateMethod `json:"workloadUpdateMethods,omitempty"`
	// BatchEvictionSize is how many VMIs are evicted at once; 10 when
	// unset.
	// +optional
	BatchEvictionSize *int `json:"batchEvictionSize,omitempty"`
	// BatchEvictionInterval between batches; 1m when unset.
	// +optional
	BatchEvictionInterval *metav1.Duration `json:"batchEvictionInterval,omitempty"`
}

// LiveUpdateConfiguration bounds CPU and memory hotplug.
type LiveUpdateConfiguration struct {
	// MaxHotplugRatio is the maximum over the initial amount; 4 when
	// unset.
	// +optional
	MaxHotplugRatio uint32 `json:"maxHotplugRatio,omitempty"`
	// MaxCPUSockets a guest may grow to.
	// +optional
	MaxCPUSockets *uint32 `json:"maxCpuSockets,omitempty"`
	// MaxGuest memory a guest may grow to.
	// +optional
	MaxGuest *resource.Quantity `json:"maxGuest,omitempty"`
}

// MediatedDevicesConfiguration says which mediated devices (vGPUs) the
// node agents create.
type MediatedDevicesConfiguration struct {
	// Enabled turns mediated-device handling on; true when unset.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// MediatedDevicesTypes (deprecated upstream: use MediatedDeviceTypes).
	// +optional
	// +listType=atomic
	MediatedDevicesTypes []string `json:"mediatedDevicesTypes,omitempty"`
	// MediatedDeviceTypes to create on every node.
	// +optional
	// +listType=atomic
	MediatedDeviceTypes []string `json:"mediatedDeviceTypes,omitempty"`
	// NodeMediatedDeviceTypes to create on the nodes a selector picks.
	// +optional
	// +listType=atomic
	NodeMediatedDeviceTypes []NodeMediatedDeviceTypesConfig `json:"nodeMediatedDeviceTypes,omitempty"`
}

// NodeMediatedDeviceTypesConfig is the mediated device types of the nodes
// a selector picks.
type NodeMediatedDeviceTypesConfig struct {
	// NodeSelector picks the nodes.
	NodeSelector map[string]string `json:"nodeSelector"`
	// MediatedDevicesTypes (deprecated upstream: use MediatedDeviceTypes).
	// +optional
	// +listType=atomic
	MediatedDevicesTypes []string `json:"mediatedDevicesTypes,omitempty"`
	// MediatedDeviceTypes to create on them.
	// +optional
	// +listType=atomic
	MediatedDeviceTypes []string `json:"mediatedDeviceTypes,omitempty"`
}

// PermittedHostDevices are the host devices guests may ask for, by
// resource name.
type PermittedHostDevices struct {
	// PCIHostDevices permitted.
	// +optional
	// +listType=atomic
	PCIHostDevices []PciHostDevice `json:"pciHostDevices,omitempty"`
	// MediatedDevices permitted.
	// +optional
	// +listType=atomic
	MediatedDevices []MediatedHostDevice `json:"mediatedDevices,omitempty"`
	// USB devices permitted.
	// +optional
	// +listType=atomic
	USB []USBHostDevice `json:"usb,omitempty"`
}

// PciHostDevice permits PCI devices of one vendor:device ID.
type PciHostDevice struct {
	// PCIVendorSelector is "vendor:device" in hex.
	PCIVendorSelector string `json:"pciVendorSelector"`
	// ResourceName the device plugin advertises.
	ResourceName string `json:"resourceName"`
	// ExternalResourceProvider says another device plugin advertises it.
	// +optional
	ExternalResourceProvider bool `json:"externalResourceProvider,omitempty"`
}

// MediatedHostDevice permits mediated devices of one type name.
type MediatedHostDevice struct {
	// MdevNameSelector is the mediated device type's name.
	MdevNameSelector string `json:"mdevNameSelector"`
	// ResourceName the device plugin advertises.
	ResourceName string `json:"resourceName"`
	// ExternalResourceProvider says another device plugin advertises it.
	// +optional
	ExternalResourceProvider bool `json:"externalResourceProvider,omitempty"`
}

// USBHostDevice permits USB devices matching selectors.
type USBHostDevice struct {
	// ResourceName the device plugin advertises.
	ResourceName string `json:"resourceName"`
	// Selectors the devices must all match.
	// +optional
	// +listType=atomic
	Selectors []USBSelector `json:"selectors,omitempty"`
	// ExternalResourceProvider says another device plugin advertises it.
	// +optional
	ExternalResourceProvider bool `json:"externalResourceProvider,omitempty"`
}

// USBSelector matches a USB device by vendor and product ID (hex).
type USBSelector struct {
	// Vendor ID.
	Vendor string `json:"vendor"`
	// Product ID.
	Product string `json:"product"`
}

// NetworkConfiguration is the cluster's network defaults and binding
// plugins.
type NetworkConfiguration struct {
	// DefaultNetworkInterface is the binding of the pod network's
	// interface when a VMI names none: bridge, masquerade or slirp;
	// bridge when unset.
	// +optional
	DefaultNetworkInterface string `json:"defaultNetworkInterface,omitempty"`
	// PermitSlirpInterface allows the slirp binding.
	// +optional
	PermitSlirpInterface *bool `json:"permitSlirpInterface,omitempty"`
	// PermitBridgeInterfaceOnPodNetwork allows the bridge binding on the
	// pod network; true when unset.
	// +optional
	PermitBridgeInterfaceOnPodNetwork *bool `json:"permitBridgeInterfaceOnPodNetwork,omitempty"`
	// Binding registers network binding plugins by name.
	// +optional
	Binding map[string]InterfaceBindingPlugin `json:"binding,omitempty"`
}

// ReloadableComponentConfiguration is configuration a component picks up
// without a restart.
type ReloadableComponentConfiguration struct {
	// RestClient configures its API client.
	// +optional
	RestClient *RESTClientConfiguration `json:"restClient,omitempty"`
}

// RESTClientConfiguration configures an API client.
type RESTClientConfiguration struct {
	// RateLimiter of the client.
	// +optional
	RateLimiter *RateLimiter `json:"rateLimiter,omitempty"`
}

// RateLimiter limits an API client's requests.
type RateLimiter struct {
	// TokenBucketRateLimiter allows QPS requests a second with bursts.
	// +optional
	TokenBucketRateLimiter *TokenBucketRateLimiter `json:"tokenBucketRateLimiter,omitempty"`
}

// TokenBucketRateLimiter allows QPS requests a second, with bursts up to
// Burst.
type TokenBucketRateLimiter struct {
	// QPS is the sustained request rate, a JSON number (5, 0.5).
	QPS Number `json:"qps"`
	// Burst is the largest burst.
	Burst int `json:"burst"`
}

// Number is a JSON number kept as its decimal text, so that the API needs
// no floating-point fields (which CRD schemas discourage) and a value
// round-trips as written.
//
// +kubebuilder:validation:Type=number
type Number string

// MarshalJSON writes the number unquoted; an empty Number is 0.
func (n Number) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("0"), nil
	}
	return []byte(n), nil
}

// UnmarshalJSON accepts a JSON number.
func (n *Number) UnmarshalJSON(data []byte) error {
	var v json.Number
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("a number is required: %w", err)
	}
	if _, err := v.Float64(); err != nil {
		return fmt.Errorf("a number is required: %w", err)
	}
	*n = Number(v)
	return nil
}

// ResourceRequirementsWithoutClaims is resource requests and limits.
type ResourceRequirementsWithoutClaims struct {
	// Limits of resources.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Requests of resources.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// SMBiosConfiguration is the SMBIOS system information guests see.
type SMBiosConfiguration struct {
	// Manufacturer of the system.
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// Product name.
	// +optional
	Product string `json:"product,omitempty"`
	// Version of the product.
	// +optional
	Version string `json:"version,omitempty"`
	// SKU of the product.
	// +optional
	SKU string `json:"sku,omitempty"`
	// Family of the product.
	// +optional
	Family string `json:"family,omitempty"`
}

// SeccompConfiguration is the seccomp profile of launcher pods.
type SeccompConfiguration struct {
	// VirtualMachineInstanceProfile of launcher pods.
	// +optional
	VirtualMachineInstanceProfile *VirtualMachineInstanceProfile `json:"virtualMachineInstanceProfile,omitempty"`
}

// VirtualMachineInstanceProfile is a seccomp profile.
type VirtualMachineInstanceProfile struct {
	// CustomProfile selects a profile.
	// +optional
	CustomProfile *CustomProfile `json:"customProfile,omitempty"`
}

// CustomProfile is a localhost seccomp profile or the runtime default.
type CustomProfile struct {
	// LocalhostProfile is a profile file on the node.
	// +optional
	LocalhostProfile *string `json:"localhostProfile,omitempty"`
	// RuntimeDefaultProfile selects the container runtime's default.
	// +optional
	RuntimeDefaultProfile bool `json:"runtimeDefaultProfile,omitempty"`
}

// SupportContainerType is a kind of helper container in launcher pods.
type SupportContainerType string

// SupportContainerResources are the resources of one kind of helper
// container.
type SupportContainerResources struct {
	// Type of the container: hotplug-disk, container-disk, virtiofs,
	// sidecar, vmexport or guest-console-log.
	Type SupportContainerType `json:"type"`
	// Resources of those containers.
	Resources ResourceRequirementsWithoutClaims `json:"resources"`
}

// TLSConfiguration is the TLS of the components' servers.
type TLSConfiguration struct {
	// MinTLSVersion: VersionTLS10, VersionTLS11, VersionTLS12 or
	// VersionTLS13.
	// +optional
	MinTLSVersion string `json:"minTLSVersion,omitempty"`
	// Ciphers allowed (TLS 1.2 and older).
	// +optional
	// +listType=set
	Ciphers []string `json:"ciphers,omitempty"`
}

// VirtualMachineOptions are cluster-wide defaults of guests.
type VirtualMachineOptions struct {
	// DisableFreePageReporting turns off free page reporting of the
	// memory balloon.
	// +optional
	DisableFreePageReporting *DisableFreePageReporting `json:"disableFreePageReporting,omitempty"`
	// DisableSerialConsoleLog turns off the serial console log
	// container.
	// +optional
	DisableSerialConsoleLog *DisableSerialConsoleLog `json:"disableSerialConsoleLog,omitempty"`
}

// DisableFreePageReporting has no settings.
type DisableFreePageReporting struct{}

// DisableSerialConsoleLog has no settings.
type DisableSerialConsoleLog struct{}

// VMRolloutStrategy is how a change to a running VM's template is applied.
type VMRolloutStrategy string

// VM rollout strategies.
const (
	VMRolloutStrategyStage      VMRolloutStrategy = "Stage"
	VMRolloutStrategyLiveUpdate VMRolloutStrategy = "LiveUpdate"
)

// RoleAggregationStrategy says whether KubeVirt's roles join the default
// cluster roles.
type RoleAggregationStrategy string

// Role aggregation strategies.
const (
	RoleAggregationStrategyAggregateToDefault RoleAggregationStrategy = "AggregateToDefault"
	RoleAggregationStrategyManual             RoleAggregationStrategy = "Manual"
)
