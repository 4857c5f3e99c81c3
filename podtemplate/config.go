package podtemplate

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Defaults New fills into a Config field left at its zero value. The
// directories and the OVMF path are KubeVirt's.
const (
	DefaultShareDir                      = "/var/run/kubevirt"
	DefaultEphemeralDiskDir              = "/var/run/kubevirt-ephemeral-disks"
	DefaultContainerDiskDir              = "/var/run/kubevirt/container-disks"
	DefaultHotplugDiskDir                = "/var/run/kubevirt/hotplug-disks"
	DefaultOVMFPath                      = "/usr/share/OVMF"
	DefaultQEMUTimeout                   = 240 * time.Second
	DefaultTerminationGracePeriodSeconds = 30
	DefaultCPUAllocationRatio            = 10
	DefaultLessPVCSpaceToleration        = 10
)

// HostDiskGate is the KubeVirt feature gate that allows hostDisk volumes: a
// VMI with one renders only when Config.FeatureGates lists it, because its
// pod mounts a directory of the node read-write.
const HostDiskGate = "HostDisk"

// ExpandDisksGate is the KubeVirt feature gate that grows a guest's disk
// when its claim grows: launchers then run with --expand-disks.
const ExpandDisksGate = "ExpandDisks"

// VMPersistentStateGate is the KubeVirt feature gate that allows persistent
// guest state (devices.tpm.persistent, firmware.bootloader.efi.persistent):
// a VMI with it renders only when Config.FeatureGates lists it, and its
// launcher pod then mounts the VM's backend-storage claim
// (v1.BackendStorageClaimName, which the VMI controller creates) at
// VMStateDir.
const VMPersistentStateGate = "VMPersistentState"

// VMStateDir is where the launcher pod mounts a VMI's backend-storage
// claim (KubeVirt's /var/lib/libvirt/vm-state); the launcher keeps the TPM
// state in its swtpm/ and the EFI variable store in its nvram/.
const VMStateDir = "/var/lib/libvirt/vm-state"

// RootGate is the KubeVirt feature gate that runs the launcher as root
// inside its container (libvirt's system instance), as vmkit did before
// launchers ran as the qemu user 107 by default; for users whose storage
// or devices a non-root QEMU cannot open. Root launcher pods do not meet
// the Pod Security "restricted" level.
const RootGate = "Root"

// Config is what a Renderer needs besides the VMI. Only LauncherImage is
// required; every other zero value means the default named on the field.
type Config struct {
	// LauncherImage is the image of the compute container and of the
	// container-disk-binary init container, e.g. quay.io/kubevirt/virt-launcher:v1.5.0.
	LauncherImage string
	// ImagePullPolicy of the launcher image; IfNotPresent when empty.
	ImagePullPolicy corev1.PullPolicy
	// ImagePullSecrets are added to every launcher pod, after the pull
	// secrets the VMI's container disks and kernel boot image name.
	ImagePullSecrets []string

	// ShareDir is the directory the launcher shares with the node agent
	// (--kubevirt-share-dir); its sockets subdirectory holds the launcher's
	// command socket. Default /var/run/kubevirt.
	ShareDir string
	// EphemeralDiskDir holds empty disks and copy-on-write overlays
	// (--ephemeral-disk-dir). Default /var/run/kubevirt-ephemeral-disks.
	EphemeralDiskDir string
	// ContainerDiskDir is where container disks are served to the launcher
	// (--container-disk-dir). Default /var/run/kubevirt/container-disks.
	ContainerDiskDir string
	// HotplugDiskDir is where the node agent mounts hotplugged disks into the
	// pod. Default /var/run/kubevirt/hotplug-disks.
	HotplugDiskDir string
	// OVMFPath is the directory of the EFI firmware in the launcher image
	// (--ovmf-path). Default /usr/share/OVMF.
	OVMFPath string

	// QEMUTimeout is how long the launcher waits for QEMU to start
	// (--qemu-timeout), rounded up to whole seconds. Default 240s.
	QEMUTimeout time.Duration
	// TerminationGracePeriodSeconds is the guest's shutdown grace period when
	// the VMI sets none. Default 30, as KubeVirt's.
	TerminationGracePeriodSeconds int64
	// LessPVCSpaceToleration is the percentage by which a PVC may be smaller
	// than a disk image the launcher creates on it
	// (--less-pvc-space-toleration). Default 10; negative means 0.
	LessPVCSpaceToleration int

	// EmulationAllowed lets guests run without /dev/kvm (QEMU TCG): the pod
	// then asks for neither devices.kubevirt.io/kvm nor vhost-net and the
	// launcher gets --use-emulation.
	EmulationAllowed bool
	// CPUAllocationRatio turns vCPUs into a CPU request when the VMI asks for
	// none: request = vCPUs / ratio. Default 10 (100m per vCPU), as KubeVirt's.
	CPUAllocationRatio int
	// Overhead adjusts the memory the pod requests beyond the guest's memory.
	Overhead OverheadPolicy

	// ExtraLabels are added to every launcher pod. They override the VMI's
	// labels but cannot replace kubevirt.io or kubevirt.io/created-by.
	ExtraLabels map[string]string
	// ExtraAnnotations are added to every launcher pod. They override the
	// VMI's annotations but cannot replace kubevirt.io/domain.
	ExtraAnnotations map[string]string

	// FeatureGates are the KubeVirt feature gates turned on, as listed in
	// the KubeVirt CR's spec.configuration.developerConfiguration.featureGates.
	// The renderer consults HostDiskGate, RootGate, VMPersistentStateGate
	// and ExpandDisksGate; it ignores the others. None by default.
	FeatureGates []string

	// HostNetwork puts launcher pods on the node's network namespace: for
	// clusters without a pod network (a single node whose CNI sets up
	// loopback only). Guests then cannot use pod-network interfaces.
	HostNetwork bool

	// ClaimVolumeMode reports whether a PersistentVolumeClaim (or a
	// DataVolume's claim) in a namespace is a block device, so the renderer
	// attaches it as a device instead of a mount. A lister-backed function
	// fits; an error (for instance: the claim does not exist yet) fails the
	// render. Nil treats every claim as a filesystem.
	ClaimVolumeMode func(namespace, claimName string) (corev1.PersistentVolumeMode, error)
}

// OverheadPolicy adjusts the memory overhead of every launcher pod:
// overhead = computed × Ratio + Extra (dedicated-CPU reserve excluded from
// the multiplication, see docs/podtemplate.md).
type OverheadPolicy struct {
	// Ratio multiplies the computed overhead, like KubeVirt's
	// additionalGuestMemoryOverheadRatio; 0 means 1, otherwise at least 1.
	Ratio float64
	// Extra is added to every pod's overhead; it must not be negative.
	Extra resource.Quantity
}

// withDefaults returns a copy of c with defaults filled in and its maps and
// slices copied, so that later changes by the caller do not reach the
// Renderer.
func (c Config) withDefaults() Config {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	setDefault(&c.ShareDir, DefaultShareDir)
	setDefault(&c.EphemeralDiskDir, DefaultEphemeralDiskDir)
	setDefault(&c.ContainerDiskDir, DefaultContainerDiskDir)
	setDefault(&c.HotplugDiskDir, DefaultHotplugDiskDir)
	setDefault(&c.OVMFPath, DefaultOVMFPath)
	if c.QEMUTimeout == 0 {
		c.QEMUTimeout = DefaultQEMUTimeout
	}
	if c.TerminationGracePeriodSeconds == 0 {
		c.TerminationGracePeriodSeconds = DefaultTerminationGracePeriodSeconds
	}
	if c.LessPVCSpaceToleration == 0 {
		c.LessPVCSpaceToleration = DefaultLessPVCSpaceToleration
	} else if c.LessPVCSpaceToleration < 0 {
		c.LessPVCSpaceToleration = 0
	}
	if c.CPUAllocationRatio == 0 {
		c.CPUAllocationRatio = DefaultCPUAllocationRatio
	}
	if c.Overhead.Ratio == 0 {
		c.Overhead.Ratio = 1
	}
	c.ImagePullSecrets = slices.Clone(c.ImagePullSecrets)
	c.FeatureGates = slices.Clone(c.FeatureGates)
	c.ExtraLabels = maps.Clone(c.ExtraLabels)
	c.ExtraAnnotations = maps.Clone(c.ExtraAnnotations)
	c.Overhead.Extra = c.Overhead.Extra.DeepCopy()
	return c
}

// gateEnabled reports whether the KubeVirt feature gate name is turned on.
func (c *Config) gateEnabled(name string) bool {
	return slices.Contains(c.FeatureGates, name)
}

func setDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// validate reports every invalid field of a defaulted Config.
func (c *Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("podtemplate: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.LauncherImage) == "" {
		bad("LauncherImage", "required")
	} else if strings.ContainsAny(c.LauncherImage, " \t\n") {
		bad("LauncherImage", "%q contains white space", c.LauncherImage)
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		bad("ImagePullPolicy", "%q is not Always, IfNotPresent or Never", c.ImagePullPolicy)
	}
	for i, s := range c.ImagePullSecrets {
		if msgs := validation.IsDNS1123Subdomain(s); len(msgs) != 0 {
			bad(fmt.Sprintf("ImagePullSecrets[%d]", i), "%q: %s", s, strings.Join(msgs, "; "))
		}
	}
	for i, g := range c.FeatureGates {
		if g == "" || strings.ContainsAny(g, " \t\n,") {
			bad(fmt.Sprintf("FeatureGates[%d]", i), "%q is not a feature gate name", g)
		}
	}
	for _, d := range []struct{ field, dir string }{
		{"ShareDir", c.ShareDir},
		{"EphemeralDiskDir", c.EphemeralDiskDir},
		{"ContainerDiskDir", c.ContainerDiskDir},
		{"HotplugDiskDir", c.HotplugDiskDir},
		{"OVMFPath", c.OVMFPath},
	} {
		if !path.IsAbs(d.dir) || path.Clean(d.dir) != d.dir || d.dir == "/" {
			bad(d.field, "%q must be a clean absolute path other than /", d.dir)
		}
	}
	if c.QEMUTimeout < 0 {
		bad("QEMUTimeout", "%v must not be negative", c.QEMUTimeout)
	}
	if c.TerminationGracePeriodSeconds < 0 {
		bad("TerminationGracePeriodSeconds", "%d must not be negative", c.TerminationGracePeriodSeconds)
	}
	if c.LessPVCSpaceToleration > 100 {
		bad("LessPVCSpaceToleration", "%d is more than 100 percent", c.LessPVCSpaceToleration)
	}
	if c.CPUAllocationRatio < 1 {
		bad("CPUAllocationRatio", "%d must be at least 1", c.CPUAllocationRatio)
	}
	if !(c.Overhead.Ratio >= 1 && c.Overhead.Ratio <= 100) { // also rejects NaN
		bad("Overhead.Ratio", "%v must be between 1 and 100", c.Overhead.Ratio)
	}
	if c.Overhead.Extra.Sign() < 0 {
		bad("Overhead.Extra", "%s must not be negative", c.Overhead.Extra.String())
	}
	for _, k := range slices.Sorted(maps.Keys(c.ExtraLabels)) {
		if k == v1.AppLabel || k == v1.CreatedByLabel {
			bad("ExtraLabels", "%q is set by the renderer", k)
			continue
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) != 0 {
			bad("ExtraLabels", "key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(c.ExtraLabels[k]); len(msgs) != 0 {
			bad("ExtraLabels", "value of %q: %s", k, strings.Join(msgs, "; "))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.ExtraAnnotations)) {
		if k == v1.DomainAnnotation {
			bad("ExtraAnnotations", "%q is set by the renderer", k)
			continue
		}
		if msgs := validation.IsQualifiedName(strings.ToLower(k)); len(msgs) != 0 {
			bad("ExtraAnnotations", "key %q: %s", k, strings.Join(msgs, "; "))
		}
	}
	return errors.Join(errs...)
}
