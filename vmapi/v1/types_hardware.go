package v1

// Hardware of a guest that instance types and preferences set (GPUs, host
// devices, NUMA, TPM, Hyper-V enlightenments, ...), with KubeVirt's names.
// vmkit's CRDs accept all of it so KubeVirt manifests apply; see
// docs/api-compatibility.md for what the node agent honours.

// GPU is a GPU (or vGPU) from a device plugin, passed through to the guest.
type GPU struct {
	// Name of the GPU in the guest's device list.
	Name string `json:"name"`
	// DeviceName is the resource name the device plugin advertises.
	// +optional
	DeviceName string `json:"deviceName,omitempty"`
	// ClaimRequest names a dynamic resource allocation claim instead.
	// +optional
	*ClaimRequest `json:",inline"`
	// VirtualGPUOptions configure a vGPU's display.
	// +optional
	VirtualGPUOptions *VGPUOptions `json:"virtualGPUOptions,omitempty"`
	// Tag is passed to the guest through device metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
}

// ClaimRequest names a request of a ResourceClaim listed in the VMI's
// resourceClaims.
type ClaimRequest struct {
	// ClaimName is the name of the entry in spec.resourceClaims.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// RequestName is the request of the claim's spec.devices.requests.
	// +optional
	RequestName string `json:"requestName,omitempty"`
}

// VGPUOptions configure a vGPU.
type VGPUOptions struct {
	// Display configures the vGPU's display.
	// +optional
	Display *VGPUDisplayOptions `json:"display,omitempty"`
}

// VGPUDisplayOptions configure a vGPU's display.
type VGPUDisplayOptions struct {
	// Enabled turns the vGPU-backed display adapter on (the default) or off.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// RamFB adds a boot framebuffer until the guest's driver loads; on by default.
	// +optional
	RamFB *FeatureState `json:"ramFB,omitempty"`
}

// HostDevice is a host device from a device plugin, passed through to the guest.
type HostDevice struct {
	// Name of the device in the guest's device list.
	Name string `json:"name"`
	// DeviceName is the resource name the device plugin advertises.
	// +optional
	DeviceName string `json:"deviceName,omitempty"`
	// ClaimRequest names a dynamic resource allocation claim instead.
	// +optional
	*ClaimRequest `json:",inline"`
	// Tag is passed to the guest through device metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
}

// DiskIOThreads sizes the supplementalPool I/O thread policy.
type DiskIOThreads struct {
	// SupplementalPoolThreadCount is the number of I/O threads of the pool.
	// +optional
	SupplementalPoolThreadCount *uint32 `json:"supplementalPoolThreadCount,omitempty"`
}

// LaunchSecurity asks for a confidential guest.
type LaunchSecurity struct {
	// SEV is AMD Secure Encrypted Virtualization.
	// +optional
	SEV *SEV `json:"sev,omitempty"`
	// SNP is AMD SEV-SNP.
	// +optional
	SNP *SEVSNP `json:"snp,omitempty"`
	// TDX is Intel Trust Domain Extensions.
	// +optional
	TDX *TDX `json:"tdx,omitempty"`
}

// SEV configures AMD SEV.
type SEV struct {
	// Policy flags of the guest.
	// +optional
	Policy *SEVPolicy `json:"policy,omitempty"`
	// Attestation, if set, runs the attestation process.
	// +optional
	Attestation *SEVAttestation `json:"attestation,omitempty"`
	// Session is the base64-encoded session blob.
	// +optional
	Session string `json:"session,omitempty"`
	// DHCert is the guest owner's base64-encoded Diffie-Hellman key.
	// +optional
	DHCert string `json:"dhCert,omitempty"`
}

// SEVPolicy holds SEV guest policy flags.
type SEVPolicy struct {
	// EncryptedState requires SEV-ES; false by default.
	// +optional
	EncryptedState *bool `json:"encryptedState,omitempty"`
}

// SEVAttestation asks for SEV attestation.
type SEVAttestation struct{}

// SEVSNP asks for AMD SEV-SNP.
type SEVSNP struct{}

// TDX asks for Intel TDX.
type TDX struct{}

// NUMA configures the guest's NUMA topology.
type NUMA struct {
	// GuestMappingPassthrough mirrors the host NUMA cells of the pod's
	// dedicated CPUs in the guest.
	// +optional
	GuestMappingPassthrough *NUMAGuestMappingPassthrough `json:"guestMappingPassthrough,omitempty"`
}

// NUMAGuestMappingPassthrough mirrors host NUMA cells in the guest.
type NUMAGuestMappingPassthrough struct{}

// Realtime tunes the guest for low latency.
type Realtime struct {
	// Mask selects the realtime vCPUs, in libvirt's syntax ("0-3,^1").
	// +optional
	Mask string `json:"mask,omitempty"`
}

// InputBus is the bus of an input device.
type InputBus string

// Input buses.
const (
	InputBusUSB    InputBus = "usb"
	InputBusVirtio InputBus = "virtio"
)

// InputType is the type of an input device.
type InputType string

// Input types.
const (
	InputTypeTablet   InputType = "tablet"
	InputTypeKeyboard InputType = "keyboard"
)

// BlockSize is the block size a disk shows the guest: custom sizes, or the
// sizes of the backing volume.
type BlockSize struct {
	// Custom sizes.
	// +optional
	Custom *CustomBlockSize `json:"custom,omitempty"`
	// MatchVolume takes the sizes of the backing volume.
	// +optional
	MatchVolume *FeatureState `json:"matchVolume,omitempty"`
}

// CustomBlockSize is a disk's logical and physical block size in bytes.
type CustomBlockSize struct {
	// Logical block size.
	// +optional
	Logical uint `json:"logical,omitempty"`
	// Physical block size.
	// +optional
	Physical uint `json:"physical,omitempty"`
	// DiscardGranularity in bytes.
	// +optional
	DiscardGranularity *uint `json:"discardGranularity,omitempty"`
}

// TPMDevice is an emulated TPM.
type TPMDevice struct {
	// Enabled set to false removes a TPM a preference would add; true by default.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Persistent keeps the TPM's state across reboots; false by default.
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// PanicDeviceModel is the model of a panic device.
type PanicDeviceModel string

// Panic device models.
const (
	PanicDeviceModelHyperv  PanicDeviceModel = "hyperv"
	PanicDeviceModelIsa     PanicDeviceModel = "isa"
	PanicDeviceModelPvpanic PanicDeviceModel = "pvpanic"
)

// PanicDevice signals a guest crash to the host.
type PanicDevice struct {
	// Model is isa, hyperv or pvpanic; the hypervisor picks one when unset.
	// +optional
	Model *PanicDeviceModel `json:"model,omitempty"`
}

// SoundDevice is an emulated sound card.
type SoundDevice struct {
	// Name of the sound device.
	Name string `json:"name"`
	// Model is ich9 (the default) or ac97.
	// +optional
	Model string `json:"model,omitempty"`
}

// VideoDevice is the video device of the guest's graphics.
type VideoDevice struct {
	// Type is virtio, vga, bochs or ramfb; chosen by architecture and
	// firmware when unset.
	// +optional
	Type string `json:"type,omitempty"`
}

// FeatureHyperv enables Hyper-V enlightenments; each is left to the machine
// type when unset.
type FeatureHyperv struct {
	// Relaxed disables watchdog timeouts in the guest.
	// +optional
	Relaxed *FeatureState `json:"relaxed,omitempty"`
	// VAPIC paravirtualizes interrupt handling.
	// +optional
	VAPIC *FeatureState `json:"vapic,omitempty"`
	// Spinlocks sets the spinlock retry count.
	// +optional
	Spinlocks *FeatureSpinlocks `json:"spinlocks,omitempty"`
	// VPIndex exposes the virtual processor index.
	// +optional
	VPIndex *FeatureState `json:"vpindex,omitempty"`
	// Runtime improves the guest's time accounting.
	// +optional
	Runtime *FeatureState `json:"runtime,omitempty"`
	// SyNIC enables the synthetic interrupt controller.
	// +optional
	SyNIC *FeatureState `json:"synic,omitempty"`
	// SyNICTimer enables synthetic timers; needs synic.
	// +optional
	SyNICTimer *SyNICTimer `json:"synictimer,omitempty"`
	// Reset enables Hyper-V reset; needs synic.
	// +optional
	Reset *FeatureState `json:"reset,omitempty"`
	// VendorID sets the hypervisor vendor id.
	// +optional
	VendorID *FeatureVendorID `json:"vendorid,omitempty"`
	// Frequencies exposes the TSC and APIC frequencies.
	// +optional
	Frequencies *FeatureState `json:"frequencies,omitempty"`
	// Reenlightenment notifies the guest of TSC frequency changes.
	// +optional
	Reenlightenment *FeatureState `json:"reenlightenment,omitempty"`
	// TLBFlush paravirtualizes TLB flushes; needs vpindex.
	// +optional
	TLBFlush *TLBFlush `json:"tlbflush,omitempty"`
	// IPI paravirtualizes inter-processor interrupts; needs vpindex.
	// +optional
	IPI *FeatureState `json:"ipi,omitempty"`
	// EVMCS speeds up nested guests; needs vapic.
	// +optional
	EVMCS *FeatureState `json:"evmcs,omitempty"`
}

// FeatureSpinlocks configures Hyper-V spinlock retries.
type FeatureSpinlocks struct {
	FeatureState `json:",inline"`
	// Retries is the number of retries, at least 4096 (the default).
	// +optional
	Retries *uint32 `json:"spinlocks,omitempty"`
}

// FeatureVendorID sets the Hyper-V vendor id.
type FeatureVendorID struct {
	FeatureState `json:",inline"`
	// VendorID is up to twelve characters.
	// +optional
	VendorID string `json:"vendorid,omitempty"`
}

// SyNICTimer configures Hyper-V synthetic timers.
type SyNICTimer struct {
	FeatureState `json:",inline"`
	// Direct enables direct-mode timers.
	// +optional
	Direct *FeatureState `json:"direct,omitempty"`
}

// TLBFlush configures Hyper-V paravirtual TLB flushes.
type TLBFlush struct {
	FeatureState `json:",inline"`
	// Direct sends flushes straight to the hypervisor.
	// +optional
	Direct *FeatureState `json:"direct,omitempty"`
	// Extended allows partial flushes.
	// +optional
	Extended *FeatureState `json:"extended,omitempty"`
}

// HypervTimer is the Hyper-V reference clock.
type HypervTimer struct {
	// Enabled set to false keeps the machine type from adding the timer.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}
