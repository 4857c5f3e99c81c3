package podtemplate

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Bounds that keep the arithmetic on VMI quantities far from overflow; both
// are well above what a single host offers.
const (
	maxVCPUs       = 4096
	maxGuestMemory = 64 << 40 // 64Ti
)

// The CRD's limits on list lengths, enforced here too because the renderer
// compares list entries pairwise.
const (
	maxVolumes    = 256
	maxDisks      = 256
	maxInterfaces = 64
	maxNetworks   = 64
)

// guestFacts are the properties of a VMI that several parts of the pod
// depend on, computed once per render.
type guestFacts struct {
	ref objectRef
	// vcpus is the number of guest vCPUs (at least 1).
	vcpus int64
	// guestMemory is the memory the guest sees, in bytes (at least 1).
	guestMemory int64
	// dedicated is true when the vCPUs are pinned to dedicated host CPUs;
	// the pod then gets Guaranteed QoS.
	dedicated bool
	// emulatorThread adds one dedicated CPU for QEMU's emulator thread.
	emulatorThread bool
	// hugePages is the canonical huge page size ("2Mi"), or "".
	hugePages string
	// disks and interfaces are the guest's disk and NIC counts; interfaces
	// includes the pod interface attached by default.
	disks, interfaces int
	// tap is true when an interface is backed by a tap device (/dev/net/tun);
	tap bool
	// passt is whether the pod network's interface uses the passtBinding.
	passt passtUse
	// graphics is true when a VNC display and video device are attached.
	graphics bool
	// tpm is true when the guest has a TPM (libvirt runs swtpm for it).
	tpm bool
	// containerDisks counts containerDisk volumes; kernelBoot is true when
	// the kernel comes from a container image.
	containerDisks int
	kernelBoot     bool
	// graceSeconds is the guest's shutdown grace period.
	graceSeconds int64
}

// inspect validates what the pod depends on beyond single volumes and
// computes the guest's facts into f. defaultGrace applies when the VMI sets
// no grace period.
func inspect(vmi *v1.VirtualMachineInstance, defaultGrace int64, f *guestFacts) error {
	if vmi == nil {
		return &FieldError{Kind: kindVMI, Field: "(object)", Detail: "nil VirtualMachineInstance"}
	}
	ref := objectRef{kind: kindVMI, namespace: vmi.Namespace, name: vmi.Name}
	switch {
	case !isDNSSubdomain(vmi.Name):
		return ref.errorf("metadata.name", "%q: %s", vmi.Name, dnsSubdomainError(vmi.Name))
	case !isDNSLabel(vmi.Namespace):
		return ref.errorf("metadata.namespace", "%q: %s", vmi.Namespace, dnsLabelError(vmi.Namespace))
	case vmi.UID == "":
		return ref.errorf("metadata.uid", "required: render pods for VMIs read from the API server")
	}
	spec := &vmi.Spec
	*f = guestFacts{ref: ref}
	for _, l := range [...]struct {
		field  string
		n, max int
	}{
		{"spec.volumes", len(spec.Volumes), maxVolumes},
		{"spec.domain.devices.disks", len(spec.Domain.Devices.Disks), maxDisks},
		{"spec.domain.devices.interfaces", len(spec.Domain.Devices.Interfaces), maxInterfaces},
		{"spec.networks", len(spec.Networks), maxNetworks},
	} {
		if l.n > l.max {
			return ref.errorf(l.field, "%d entries, more than the %d allowed", l.n, l.max)
		}
	}

	var err error
	if f.vcpus, err = vcpuCount(ref, spec); err != nil {
		return err
	}
	if f.guestMemory, err = guestMemory(ref, spec); err != nil {
		return err
	}
	if cpu := spec.Domain.CPU; cpu != nil && cpu.DedicatedCPUPlacement {
		f.dedicated = true
		f.emulatorThread = cpu.IsolateEmulatorThread
	}
	if f.hugePages, err = hugePageSize(ref, spec, f.guestMemory); err != nil {
		return err
	}

	devices := &spec.Domain.Devices
	f.disks = len(devices.Disks)
	for i := range devices.Disks {
		name := devices.Disks[i].Name
		if indexOfVolume(spec.Volumes, name) < 0 {
			return ref.errorf("spec.domain.devices.disks["+strconv.Itoa(i)+"]", "volume %q not found in spec.volumes", name)
		}
	}
	if err := inspectInterfaces(f, spec); err != nil {
		return err
	}
	f.graphics = devices.AutoattachGraphicsDevice == nil || *devices.AutoattachGraphicsDevice
	f.tpm = hasTPM(devices)

	for i := range spec.Volumes {
		if spec.Volumes[i].ContainerDisk != nil {
			f.containerDisks++
		}
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		if fw.KernelBoot.Container.Image == "" {
			return ref.errorf("spec.domain.firmware.kernelBoot.container.image", "required")
		}
		if p := fw.KernelBoot.Container.ImagePullPolicy; !validPullPolicy(p) {
			return ref.errorf("spec.domain.firmware.kernelBoot.container.imagePullPolicy", "%q is not Always, IfNotPresent or Never", p)
		}
		f.kernelBoot = true
	}

	f.graceSeconds = defaultGrace
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		if *g < 0 {
			return ref.errorf("spec.terminationGracePeriodSeconds", "%d must not be negative", *g)
		}
		f.graceSeconds = *g
	}
	// Keep the padded pod grace period (see launcherGracePeriods) in int64.
	if f.graceSeconds > 1<<40 {
		return ref.errorf("spec.terminationGracePeriodSeconds", "%d is too large", f.graceSeconds)
	}
	return nil
}

// vcpuCount is sockets × cores × threads when the VMI gives a topology,
// else its CPU limit or request rounded up, else 1 (KubeVirt's rule).
func vcpuCount(ref objectRef, spec *v1.VirtualMachineInstanceSpec) (int64, error) {
	if cpu := spec.Domain.CPU; cpu != nil && (cpu.Sockets != 0 || cpu.Cores != 0 || cpu.Threads != 0) {
		n := int64(1)
		for _, x := range []uint32{cpu.Sockets, cpu.Cores, cpu.Threads} {
			n *= max(int64(x), 1)
			if n > maxVCPUs {
				return 0, ref.errorf("spec.domain.cpu", "sockets × cores × threads exceeds %d vCPUs", maxVCPUs)
			}
		}
		return n, nil
	}
	res := &spec.Domain.Resources
	for _, l := range []struct {
		field string
		list  corev1.ResourceList
	}{{"limits", res.Limits}, {"requests", res.Requests}} {
		q, ok := l.list[corev1.ResourceCPU]
		if !ok {
			continue
		}
		if q.Sign() <= 0 || q.CmpInt64(maxVCPUs) > 0 {
			return 0, ref.errorf("spec.domain.resources."+l.field+".cpu", "%s must be more than 0 and at most %d", q.String(), maxVCPUs)
		}
		return q.Value(), nil // rounds up
	}
	return 1, nil
}

// guestMemory is domain.memory.guest, else the memory request, else the
// memory limit, in bytes.
func guestMemory(ref objectRef, spec *v1.VirtualMachineInstanceSpec) (int64, error) {
	var q resource.Quantity
	field := ""
	if m := spec.Domain.Memory; m != nil && m.Guest != nil {
		q, field = *m.Guest, "spec.domain.memory.guest"
	} else if r, ok := spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		q, field = r, "spec.domain.resources.requests.memory"
	} else if l, ok := spec.Domain.Resources.Limits[corev1.ResourceMemory]; ok {
		q, field = l, "spec.domain.resources.limits.memory"
	} else {
		return 0, ref.errorf("spec.domain.resources.requests.memory", "required: the guest needs memory (or set spec.domain.memory.guest)")
	}
	if q.Sign() <= 0 || q.CmpInt64(maxGuestMemory) > 0 {
		return 0, ref.errorf(field, "%s must be more than 0 and at most 64Ti", q.String())
	}
	return q.Value(), nil
}

// hugePageSize returns the canonical huge page size of a guest backed by
// huge pages, or "".
func hugePageSize(ref objectRef, spec *v1.VirtualMachineInstanceSpec, guest int64) (string, error) {
	m := spec.Domain.Memory
	if m == nil || m.Hugepages == nil {
		return "", nil
	}
	const field = "spec.domain.memory.hugepages.pageSize"
	size, err := resource.ParseQuantity(m.Hugepages.PageSize)
	if err != nil {
		return "", ref.errorf(field, "%q is not a quantity such as 2Mi or 1Gi", m.Hugepages.PageSize)
	}
	if size.Sign() <= 0 || size.CmpInt64(maxGuestMemory) > 0 {
		return "", ref.errorf(field, "%q must be more than 0", m.Hugepages.PageSize)
	}
	if guest%size.Value() != 0 {
		return "", ref.errorf(field, "the guest memory (%d bytes) is not a multiple of the page size %s", guest, size.String())
	}
	return size.String(), nil
}

// inspectInterfaces checks that every interface has a network and records
// the NIC count and which host devices the NICs need.
func inspectInterfaces(f *guestFacts, spec *v1.VirtualMachineInstanceSpec) error {
	devices := &spec.Domain.Devices
	f.interfaces = interfaceCount(spec)
	f.passt = passtOf(devices)
	if len(devices.Interfaces) == 0 && f.interfaces == 1 {
		// The default pod interface: a virtio NIC on a bridge (tap).
		f.tap = true
		return nil
	}
	for i := range devices.Interfaces {
		iface := &devices.Interfaces[i]
		if !hasNetwork(spec.Networks, iface.Name) {
			return f.ref.errorf("spec.domain.devices.interfaces["+strconv.Itoa(i)+"]", "network %q not found in spec.networks", iface.Name)
		}
		for j, p := range iface.Ports {
			field := "spec.domain.devices.interfaces[" + strconv.Itoa(i) + "].ports[" + strconv.Itoa(j) + "]"
			if p.Port < 1 || p.Port > 65535 {
				return f.ref.errorf(field+".port", "%d is not between 1 and 65535", p.Port)
			}
			if p.Name != "" && len(validation.IsValidPortName(p.Name)) != 0 {
				return f.ref.errorf(field+".name", "%q is not a valid port name (at most 15 lower-case letters, digits and '-')", p.Name)
			}
			if p.Protocol != "" && p.Protocol != "TCP" && p.Protocol != "UDP" {
				return f.ref.errorf(field+".protocol", "%q is not TCP or UDP", p.Protocol)
			}
		}
		b := &iface.InterfaceBindingMethod
		if b.SRIOV != nil || b.Slirp != nil || b.Passt != nil || b.PasstBinding != nil || b.Macvtap != nil || b.Binding != nil {
			continue // no tap device of the launcher's own
		}
		f.tap = true
	}
	return nil
}

// interfaceCount is the number of guest NICs: the listed interfaces, or the
// pod interface attached by default to a guest that lists no interfaces and
// no networks (unless devices.autoattachPodInterface is false).
func interfaceCount(spec *v1.VirtualMachineInstanceSpec) int {
	devices := &spec.Domain.Devices
	if len(devices.Interfaces) == 0 && len(spec.Networks) == 0 &&
		(devices.AutoattachPodInterface == nil || *devices.AutoattachPodInterface) {
		return 1
	}
	return len(devices.Interfaces)
}

func hasNetwork(networks []v1.Network, name string) bool {
	for i := range networks {
		if networks[i].Name == name {
			return true
		}
	}
	return false
}

func indexOfVolume(volumes []v1.Volume, name string) int {
	for i := range volumes {
		if volumes[i].Name == name {
			return i
		}
	}
	return -1
}
