package v1

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Validate functions check what the CRDs' OpenAPI schemas and CEL rules
// cannot express (and, for Go callers that bypass the API server, the name
// references the CEL rules also check). Each error names the offending field
// by its full path. They never mutate their argument; run the SetDefaults_
// functions first to validate an object as the API server would store it.

// ValidateVirtualMachineInstance validates a VMI's spec.
func ValidateVirtualMachineInstance(vmi *VirtualMachineInstance) field.ErrorList {
	if vmi == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("VirtualMachineInstance is nil"))}
	}
	return ValidateVirtualMachineInstanceSpec(field.NewPath("spec"), &vmi.Spec)
}

// ValidateVirtualMachineInstanceSpec validates a VMI spec found at fldPath
// (spec for a VMI, spec.template.spec for a VM or replica set).
func ValidateVirtualMachineInstanceSpec(fldPath *field.Path, spec *VirtualMachineInstanceSpec) field.ErrorList {
	if spec == nil {
		return field.ErrorList{field.Required(fldPath, "a VirtualMachineInstance spec is required")}
	}
	domainPath := fldPath.Child("domain")
	devicesPath := domainPath.Child("devices")
	devices := &spec.Domain.Devices

	var errs field.ErrorList
	errs = append(errs, validateGuestMemory(domainPath, &spec.Domain)...)
	errs = append(errs, validateDedicatedCPUPlacement(domainPath, &spec.Domain)...)
	errs = append(errs, validateHugepages(domainPath, &spec.Domain)...)
	errs = append(errs, validateCPU(domainPath.Child("cpu"), spec.Domain.CPU)...)
	errs = append(errs, validateFirmware(domainPath, &spec.Domain)...)
	errs = append(errs, validateDisks(devicesPath.Child("disks"), devices.Disks, volumeNames(spec.Volumes), fldPath.Child("volumes"))...)
	errs = append(errs, validateVolumes(fldPath.Child("volumes"), spec.Volumes)...)
	errs = append(errs, validateInterfaces(devicesPath.Child("interfaces"), devices.Interfaces, spec.Networks, fldPath.Child("networks"))...)
	errs = append(errs, validateNetworks(fldPath.Child("networks"), spec.Networks)...)
	errs = append(errs, validateBootOrders(devicesPath, devices.Disks, devices.Interfaces)...)
	errs = append(errs, validateTerminationGracePeriod(fldPath.Child("terminationGracePeriodSeconds"), spec.TerminationGracePeriodSeconds)...)
	errs = append(errs, validateProbe(fldPath.Child("readinessProbe"), spec.ReadinessProbe, false, spec)...)
	errs = append(errs, validateProbe(fldPath.Child("livenessProbe"), spec.LivenessProbe, true, spec)...)
	errs = append(errs, validateAccessCredentials(fldPath.Child("accessCredentials"), spec.AccessCredentials, spec.Volumes)...)
	return errs
}

// ValidateVirtualMachine validates a VM: its run strategy and its template.
func ValidateVirtualMachine(vm *VirtualMachine) field.ErrorList {
	if vm == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("VirtualMachine is nil"))}
	}
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateRunStrategy(specPath, &vm.Spec)...)
	if vm.Spec.Template == nil {
		errs = append(errs, field.Required(specPath.Child("template"), "a VirtualMachine needs a template for the instances it starts"))
		return errs
	}
	errs = append(errs, ValidateVirtualMachineInstanceSpec(specPath.Child("template", "spec"), &vm.Spec.Template.Spec)...)
	return errs
}

// ValidateVirtualMachineInstanceReplicaSet validates a replica set: its
// replica count, its selector, and its template, whose labels the selector
// must match.
func ValidateVirtualMachineInstanceReplicaSet(rs *VirtualMachineInstanceReplicaSet) field.ErrorList {
	if rs == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("VirtualMachineInstanceReplicaSet is nil"))}
	}
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if r := rs.Spec.Replicas; r != nil && *r < 0 {
		errs = append(errs, field.Invalid(specPath.Child("replicas"), *r, "must be 0 or more"))
	}
	selectorErrs := validateReplicaSetSelector(specPath.Child("selector"), rs.Spec.Selector)
	errs = append(errs, selectorErrs...)
	if rs.Spec.Template == nil {
		errs = append(errs, field.Required(specPath.Child("template"), "a replica set needs a template for the instances it creates"))
		return errs
	}
	if len(selectorErrs) == 0 {
		errs = append(errs, validateSelectorMatchesTemplate(specPath, rs.Spec.Selector, rs.Spec.Template)...)
	}
	errs = append(errs, ValidateVirtualMachineInstanceSpec(specPath.Child("template", "spec"), &rs.Spec.Template.Spec)...)
	return errs
}

// ValidateVirtualMachineInstanceMigration validates a migration: it must
// name the VMI to migrate.
func ValidateVirtualMachineInstanceMigration(m *VirtualMachineInstanceMigration) field.ErrorList {
	if m == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("VirtualMachineInstanceMigration is nil"))}
	}
	namePath := field.NewPath("spec", "vmiName")
	if m.Spec.VMIName == "" {
		return field.ErrorList{field.Required(namePath, "name the VirtualMachineInstance to migrate")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(m.Spec.VMIName) {
		errs = append(errs, field.Invalid(namePath, m.Spec.VMIName, "is not a valid VirtualMachineInstance name: "+msg))
	}
	return errs
}

// ValidateKubeVirt validates a KubeVirt installation's spec.
func ValidateKubeVirt(kv *KubeVirt) field.ErrorList {
	if kv == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("KubeVirt is nil"))}
	}
	specPath := field.NewPath("spec")
	configPath := specPath.Child("configuration")
	var errs field.ErrorList
	errs = append(errs, validateUninstallStrategy(specPath.Child("uninstallStrategy"), kv.Spec.UninstallStrategy)...)
	errs = append(errs, validatePullPolicy(specPath.Child("imagePullPolicy"), kv.Spec.ImagePullPolicy)...)
	errs = append(errs, validatePullPolicy(configPath.Child("imagePullPolicy"), kv.Spec.Configuration.ImagePullPolicy)...)
	if dev := kv.Spec.Configuration.DeveloperConfiguration; dev != nil {
		errs = append(errs, validateFeatureGates(configPath.Child("developerConfiguration", "featureGates"), dev.FeatureGates)...)
	}
	if q := kv.Spec.Configuration.CPURequest; q != nil && q.Sign() <= 0 {
		errs = append(errs, field.Invalid(configPath.Child("cpuRequest"), q.String(), "must be greater than 0"))
	}
	return errs
}

// --- memory and CPU ---

// guestMemory returns the memory the guest sees and the field it comes from:
// domain.memory.guest, or else resources.requests.memory.
func guestMemory(domainPath *field.Path, domain *DomainSpec) (*resource.Quantity, *field.Path) {
	if domain.Memory != nil && domain.Memory.Guest != nil {
		return domain.Memory.Guest, domainPath.Child("memory", "guest")
	}
	if q, ok := domain.Resources.Requests[corev1.ResourceMemory]; ok {
		return &q, domainPath.Child("resources", "requests", "memory")
	}
	return nil, nil
}

// validateGuestMemory checks the guest has memory, every memory quantity is
// positive, and neither the guest memory nor the request exceeds the limit.
func validateGuestMemory(domainPath *field.Path, domain *DomainSpec) field.ErrorList {
	guestPath := domainPath.Child("memory", "guest")
	requestPath := domainPath.Child("resources", "requests", "memory")
	limitPath := domainPath.Child("resources", "limits", "memory")
	var guest *resource.Quantity
	if domain.Memory != nil {
		guest = domain.Memory.Guest
	}
	request, hasRequest := domain.Resources.Requests[corev1.ResourceMemory]
	limit, hasLimit := domain.Resources.Limits[corev1.ResourceMemory]

	var errs field.ErrorList
	if guest == nil && !hasRequest {
		errs = append(errs, field.Required(requestPath, fmt.Sprintf("the guest needs memory: set %s or %s", guestPath, requestPath)))
	}
	positive := func(p *field.Path, q resource.Quantity) bool {
		if q.Sign() > 0 {
			return true
		}
		errs = append(errs, field.Invalid(p, q.String(), "must be greater than 0"))
		return false
	}
	guestOK := guest == nil || positive(guestPath, *guest)
	requestOK := !hasRequest || positive(requestPath, request)
	limitOK := !hasLimit || positive(limitPath, limit)
	if !limitOK || !hasLimit {
		return errs
	}
	if hasRequest && requestOK && limit.Cmp(request) < 0 {
		errs = append(errs, field.Invalid(limitPath, limit.String(), fmt.Sprintf("must not be less than %s (%s)", requestPath, request.String())))
	}
	if guest != nil && guestOK && guest.Cmp(limit) > 0 {
		errs = append(errs, field.Invalid(guestPath, guest.String(), fmt.Sprintf("must not exceed %s (%s)", limitPath, limit.String())))
	}
	return errs
}

// validateDedicatedCPUPlacement checks that a guest with dedicated CPUs asks
// for whole CPUs and, where limits are given, requests equal to them, so its
// launcher pod gets Guaranteed QoS; and that isolateEmulatorThread is only
// used with dedicated CPUs.
func validateDedicatedCPUPlacement(domainPath *field.Path, domain *DomainSpec) field.ErrorList {
	cpu := domain.CPU
	if cpu == nil {
		return nil
	}
	cpuPath := domainPath.Child("cpu")
	if !cpu.DedicatedCPUPlacement {
		if cpu.IsolateEmulatorThread {
			return field.ErrorList{field.Forbidden(cpuPath.Child("isolateEmulatorThread"), fmt.Sprintf("only allowed when %s is true", cpuPath.Child("dedicatedCpuPlacement")))}
		}
		return nil
	}
	why := fmt.Sprintf("when %s is true", cpuPath.Child("dedicatedCpuPlacement"))
	requestsPath := domainPath.Child("resources", "requests")
	limitsPath := domainPath.Child("resources", "limits")
	res := &domain.Resources

	var errs field.ErrorList
	for _, r := range []struct {
		path *field.Path
		list corev1.ResourceList
	}{{requestsPath, res.Requests}, {limitsPath, res.Limits}} {
		if q, ok := r.list[corev1.ResourceCPU]; ok && !isWholeNumber(q) {
			errs = append(errs, field.Invalid(r.path.Child("cpu"), q.String(), "must be a whole number of CPUs "+why))
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		request, hasRequest := res.Requests[name]
		limit, hasLimit := res.Limits[name]
		if hasRequest && hasLimit && request.Cmp(limit) != 0 {
			errs = append(errs, field.Invalid(limitsPath.Child(string(name)), limit.String(),
				fmt.Sprintf("must equal %s (%s) %s", requestsPath.Child(string(name)), request.String(), why)))
		}
	}
	return errs
}

// isWholeNumber reports whether q has no fractional part.
func isWholeNumber(q resource.Quantity) bool {
	return q.Cmp(*resource.NewQuantity(q.Value(), resource.DecimalSI)) == 0
}

// validateHugepages checks the huge page size is a positive quantity and the
// guest memory a whole number of pages.
func validateHugepages(domainPath *field.Path, domain *DomainSpec) field.ErrorList {
	if domain.Memory == nil || domain.Memory.Hugepages == nil {
		return nil
	}
	sizePath := domainPath.Child("memory", "hugepages", "pageSize")
	size := domain.Memory.Hugepages.PageSize
	if size == "" {
		return field.ErrorList{field.Required(sizePath, "set the huge page size, for example 2Mi or 1Gi")}
	}
	page, err := resource.ParseQuantity(size)
	if err != nil {
		return field.ErrorList{field.Invalid(sizePath, size, "must be a quantity such as 2Mi or 1Gi")}
	}
	if page.Sign() <= 0 {
		return field.ErrorList{field.Invalid(sizePath, size, "must be greater than 0")}
	}
	guest, guestPath := guestMemory(domainPath, domain)
	if guest == nil || guest.Sign() <= 0 {
		return nil // reported by validateGuestMemory
	}
	if guest.Value()%page.Value() != 0 {
		return field.ErrorList{field.Invalid(guestPath, guest.String(), fmt.Sprintf("must be a multiple of %s (%s)", sizePath, size))}
	}
	return nil
}

// validateCPU checks sockets do not exceed maxSockets (KubeVirt's rule), the
// CPU model is a single word and feature names are set and unique. How many
// vCPUs the topology makes is not bounded here: KubeVirt admits any count
// (a node that cannot hold them leaves the VMI unscheduled).
func validateCPU(cpuPath *field.Path, cpu *CPU) field.ErrorList {
	if cpu == nil {
		return nil
	}
	var errs field.ErrorList
	if cpu.MaxSockets != 0 && cpu.Sockets > cpu.MaxSockets {
		errs = append(errs, field.Invalid(cpuPath.Child("sockets"), cpu.Sockets,
			fmt.Sprintf("must not exceed %s (%d), the sockets the guest can grow to", cpuPath.Child("maxSockets"), cpu.MaxSockets)))
	}
	if cpu.Model != "" && (strings.TrimSpace(cpu.Model) == "" || strings.ContainsAny(cpu.Model, " \t\r\n")) {
		errs = append(errs, field.Invalid(cpuPath.Child("model"), cpu.Model, "must be host-model, host-passthrough or a libvirt CPU model name, without spaces"))
	}
	seen := map[string]bool{}
	for i, f := range cpu.Features {
		namePath := cpuPath.Child("features").Index(i).Child("name")
		switch {
		case strings.TrimSpace(f.Name) == "":
			errs = append(errs, field.Required(namePath, "name the CPU feature, as libvirt knows it"))
		case seen[f.Name]:
			errs = append(errs, field.Duplicate(namePath, f.Name))
		}
		seen[f.Name] = true
	}
	return errs
}

// --- firmware ---

// validateFirmware checks direct kernel boot and that EFI secure boot does
// not run with SMM switched off.
func validateFirmware(domainPath *field.Path, domain *DomainSpec) field.ErrorList {
	fw := domain.Firmware
	if fw == nil {
		return nil
	}
	fwPath := domainPath.Child("firmware")
	var errs field.ErrorList
	errs = append(errs, validateKernelBoot(fwPath.Child("kernelBoot"), fw.KernelBoot)...)
	if fw.Bootloader != nil && fw.Bootloader.EFI != nil {
		secureBoot := fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot
		smmPath := domainPath.Child("features", "smm", "enabled")
		if secureBoot && smmDisabled(domain.Features) {
			errs = append(errs, field.Invalid(fwPath.Child("bootloader", "efi", "secureBoot"), true,
				fmt.Sprintf("EFI secure boot needs SMM, but %s is false: enable SMM or set secureBoot to false", smmPath)))
		}
	}
	return errs
}

// smmDisabled reports whether SMM is explicitly switched off.
func smmDisabled(f *Features) bool {
	return f != nil && f.SMM != nil && f.SMM.Enabled != nil && !*f.SMM.Enabled
}

// validateKernelBoot checks a direct kernel boot names an image and absolute
// paths inside it, and that kernel arguments come with a kernel.
func validateKernelBoot(kbPath *field.Path, kb *KernelBoot) field.ErrorList {
	if kb == nil {
		return nil
	}
	var errs field.ErrorList
	c := kb.Container
	if kb.KernelArgs != "" && (c == nil || c.KernelPath == "") {
		errs = append(errs, field.Forbidden(kbPath.Child("kernelArgs"), fmt.Sprintf("kernel arguments need a kernel: set %s", kbPath.Child("container", "kernelPath"))))
	}
	if c == nil {
		return errs
	}
	cPath := kbPath.Child("container")
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(cPath.Child("image"), "name the container image holding the kernel and initrd"))
	}
	if c.KernelPath == "" && c.InitrdPath == "" {
		errs = append(errs, field.Required(cPath.Child("kernelPath"), "set kernelPath, initrdPath or both"))
	}
	errs = append(errs, validateAbsolutePath(cPath.Child("kernelPath"), c.KernelPath, "the kernel's path inside the image")...)
	errs = append(errs, validateAbsolutePath(cPath.Child("initrdPath"), c.InitrdPath, "the initrd's path inside the image")...)
	return errs
}

// validateAbsolutePath checks an optional path is absolute.
func validateAbsolutePath(p *field.Path, value, what string) field.ErrorList {
	if value == "" || path.IsAbs(value) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, value, what+" must be absolute (start with /)")}
}

// --- names ---

// validateName checks a disk or volume name is a DNS-1123 label (KubeVirt's
// rule for disk names; the launcher pod's volumes take these names) not used
// before in the same list.
func validateName(p *field.Path, name string, seen map[string]bool) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a name is required")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(p, name))
	}
	seen[name] = true
	return errs
}

// maxInterfaceNameLength bounds interface and network names (the CRD's
// maxLength, which keeps its CEL rules within the API server's cost budget;
// KubeVirt sets none).
const maxInterfaceNameLength = 63

// validateInterfaceName checks an interface or network name as KubeVirt's
// webhook checks an interface's (letters, digits, '-' and '_'; a network
// has its interface's name), at most 63 characters, not used before in the
// same list.
func validateInterfaceName(p *field.Path, name string, seen map[string]bool) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a name is required")}
	}
	var errs field.ErrorList
	if strings.IndexFunc(name, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		errs = append(errs, field.Invalid(p, name, "may contain only letters, digits, '-' and '_'"))
	}
	if len(name) > maxInterfaceNameLength {
		errs = append(errs, field.TooLong(p, name, maxInterfaceNameLength))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(p, name))
	}
	seen[name] = true
	return errs
}

// withDetail adds an explanation to an error whose constructor takes none.
func withDetail(err *field.Error, detail string) *field.Error {
	err.Detail = detail
	return err
}

func volumeNames(volumes []Volume) map[string]bool {
	names := make(map[string]bool, len(volumes))
	for _, v := range volumes {
		names[v.Name] = true
	}
	return names
}

// --- disks and volumes ---

// validateDisks checks disk names, that each names a volume, that each sets
// at most one device, and the bus and PCI address of each device.
func validateDisks(disksPath *field.Path, disks []Disk, volumes map[string]bool, volumesPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range disks {
		d := &disks[i]
		p := disksPath.Index(i)
		errs = append(errs, validateName(p.Child("name"), d.Name, seen)...)
		if d.Name != "" && !volumes[d.Name] {
			errs = append(errs, withDetail(field.NotFound(p.Child("name"), d.Name), fmt.Sprintf("no volume of this name in %s", volumesPath)))
		}
		errs = append(errs, validateOneOf(p, "disk device", []setField{
			{"disk", d.Disk != nil}, {"lun", d.LUN != nil}, {"cdrom", d.CDRom != nil},
		}, false)...)
		if d.Disk != nil {
			errs = append(errs, validateDiskPCIAddress(p.Child("disk"), d.Disk)...)
		}
		if d.CDRom != nil && d.CDRom.Bus == DiskBusVirtio {
			errs = append(errs, field.NotSupported(p.Child("cdrom", "bus"), d.CDRom.Bus, []DiskBus{DiskBusSATA, DiskBusSCSI, DiskBusUSB}))
		}
	}
	return errs
}

// validateDiskPCIAddress checks a disk's PCI address, which only virtio disks may have.
func validateDiskPCIAddress(diskPath *field.Path, d *DiskTarget) field.ErrorList {
	if d.PciAddress == "" {
		return nil
	}
	p := diskPath.Child("pciAddress")
	if d.Bus != "" && d.Bus != DiskBusVirtio {
		return field.ErrorList{field.Invalid(p, d.PciAddress, fmt.Sprintf("only virtio disks have a PCI address, and %s is %q", diskPath.Child("bus"), d.Bus))}
	}
	return validatePCIAddress(p, d.PciAddress)
}

// validatePCIAddress checks a PCI address has the form dddd:bb:ss.f
// (hexadecimal domain, bus and slot, slot at most 1f, function 0-7).
func validatePCIAddress(p *field.Path, addr string) field.ErrorList {
	if addr == "" {
		return nil
	}
	const detail = "must be a PCI address dddd:bb:ss.f such as 0000:81:01.0 (hexadecimal domain, bus and slot; slot at most 1f; function 0-7)"
	if len(addr) != len("0000:00:00.0") || addr[4] != ':' || addr[7] != ':' || addr[10] != '.' {
		return field.ErrorList{field.Invalid(p, addr, detail)}
	}
	_, errDomain := strconv.ParseUint(addr[0:4], 16, 16)
	_, errBus := strconv.ParseUint(addr[5:7], 16, 8)
	slot, errSlot := strconv.ParseUint(addr[8:10], 16, 8)
	fn, errFn := strconv.ParseUint(addr[11:12], 8, 8)
	if errDomain != nil || errBus != nil || errSlot != nil || errFn != nil || slot > 0x1f || fn > 7 {
		return field.ErrorList{field.Invalid(p, addr, detail)}
	}
	return nil
}

// setField is one member of a group of mutually exclusive fields.
type setField struct {
	name string
	set  bool
}

// validateOneOf checks at most one (or, when required, exactly one) of
// fields is set under p, reporting each field after the first as forbidden.
func validateOneOf(p *field.Path, what string, fields []setField, required bool) field.ErrorList {
	var errs field.ErrorList
	first := ""
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		names = append(names, f.name)
		if !f.set {
			continue
		}
		if first == "" {
			first = f.name
			continue
		}
		errs = append(errs, field.Forbidden(p.Child(f.name), fmt.Sprintf("only one %s may be set, and %s is already set", what, p.Child(first))))
	}
	if required && first == "" {
		errs = append(errs, field.Required(p, fmt.Sprintf("set one %s: %s", what, strings.Join(names, ", "))))
	}
	return errs
}

// validateVolumes checks volume names, that each volume has exactly one
// source, and the sources the schema cannot fully check.
func validateVolumes(volumesPath *field.Path, volumes []Volume) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range volumes {
		v := &volumes[i]
		p := volumesPath.Index(i)
		errs = append(errs, validateName(p.Child("name"), v.Name, seen)...)
		errs = append(errs, validateOneOf(p, "volume source", volumeSources(&v.VolumeSource), true)...)
		errs = append(errs, validateVolumeSource(p, &v.VolumeSource)...)
	}
	return errs
}

// volumeSources lists a volume's sources in the order of the API.
func volumeSources(s *VolumeSource) []setField {
	return []setField{
		{"hostDisk", s.HostDisk != nil},
		{"persistentVolumeClaim", s.PersistentVolumeClaim != nil},
		{"cloudInitNoCloud", s.CloudInitNoCloud != nil},
		{"cloudInitConfigDrive", s.CloudInitConfigDrive != nil},
		{"sysprep", s.Sysprep != nil},
		{"containerDisk", s.ContainerDisk != nil},
		{"ephemeral", s.Ephemeral != nil},
		{"emptyDisk", s.EmptyDisk != nil},
		{"dataVolume", s.DataVolume != nil},
		{"configMap", s.ConfigMap != nil},
		{"secret", s.Secret != nil},
		{"downwardAPI", s.DownwardAPI != nil},
		{"serviceAccount", s.ServiceAccount != nil},
	}
}

// validateVolumeSource checks each source that is set.
func validateVolumeSource(p *field.Path, s *VolumeSource) field.ErrorList {
	var errs field.ErrorList
	if s.HostDisk != nil {
		errs = append(errs, validateHostDisk(p.Child("hostDisk"), s.HostDisk)...)
	}
	if s.EmptyDisk != nil {
		errs = append(errs, validateCapacity(p.Child("emptyDisk", "capacity"), s.EmptyDisk.Capacity, "an empty disk needs a capacity, such as 10Gi")...)
	}
	if s.ContainerDisk != nil && strings.TrimSpace(s.ContainerDisk.Image) == "" {
		errs = append(errs, field.Required(p.Child("containerDisk", "image"), "name the container image holding the disk"))
	}
	if s.PersistentVolumeClaim != nil && s.PersistentVolumeClaim.ClaimName == "" {
		errs = append(errs, field.Required(p.Child("persistentVolumeClaim", "claimName"), "name the PersistentVolumeClaim"))
	}
	if s.DataVolume != nil && s.DataVolume.Name == "" {
		errs = append(errs, field.Required(p.Child("dataVolume", "name"), "name the DataVolume"))
	}
	if c := s.CloudInitNoCloud; c != nil {
		errs = append(errs, validateCloudInit(p.Child("cloudInitNoCloud"), cloudInitData{
			c.UserData, c.UserDataBase64, c.UserDataSecretRef, c.NetworkData, c.NetworkDataBase64, c.NetworkDataSecretRef,
		})...)
	}
	if c := s.CloudInitConfigDrive; c != nil {
		errs = append(errs, validateCloudInit(p.Child("cloudInitConfigDrive"), cloudInitData{
			c.UserData, c.UserDataBase64, c.UserDataSecretRef, c.NetworkData, c.NetworkDataBase64, c.NetworkDataSecretRef,
		})...)
	}
	return errs
}

// validateHostDisk checks a host disk has an absolute path and a known type,
// and that DiskOrCreate comes with a capacity.
func validateHostDisk(p *field.Path, hd *HostDisk) field.ErrorList {
	var errs field.ErrorList
	switch {
	case hd.Path == "":
		errs = append(errs, field.Required(p.Child("path"), "set the disk image's path on the node"))
	case !path.IsAbs(hd.Path):
		errs = append(errs, field.Invalid(p.Child("path"), hd.Path, "the disk image's path on the node must be absolute (start with /)"))
	}
	switch hd.Type {
	case HostDiskExists:
	case HostDiskExistsOrCreateEmpty:
		errs = append(errs, validateCapacity(p.Child("capacity"), hd.Capacity, "type DiskOrCreate needs the capacity of the image to create, such as 10Gi")...)
	case "":
		errs = append(errs, field.Required(p.Child("type"), "set Disk (the image must exist) or DiskOrCreate"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), hd.Type, []HostDiskType{HostDiskExists, HostDiskExistsOrCreateEmpty}))
	}
	return errs
}

// validateCapacity checks a disk capacity is set and positive.
func validateCapacity(p *field.Path, q resource.Quantity, requiredDetail string) field.ErrorList {
	switch q.Sign() {
	case 0:
		return field.ErrorList{field.Required(p, requiredDetail)}
	case -1:
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than 0")}
	}
	return nil
}

// cloudInitData is what NoCloud and ConfigDrive sources have in common.
type cloudInitData struct {
	userData, userDataBase64       string
	userDataSecretRef              *corev1.LocalObjectReference
	networkData, networkDataBase64 string
	networkDataSecretRef           *corev1.LocalObjectReference
}

// validateCloudInit checks a cloud-init source has at most one user-data and
// one network-data source, valid base64 and named Secrets, and carries some
// data.
func validateCloudInit(p *field.Path, c cloudInitData) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateOneOf(p, "user-data source", []setField{
		{"userData", c.userData != ""}, {"userDataBase64", c.userDataBase64 != ""}, {"secretRef", c.userDataSecretRef != nil},
	}, false)...)
	errs = append(errs, validateOneOf(p, "network-data source", []setField{
		{"networkData", c.networkData != ""}, {"networkDataBase64", c.networkDataBase64 != ""}, {"networkDataSecretRef", c.networkDataSecretRef != nil},
	}, false)...)
	errs = append(errs, validateBase64(p.Child("userDataBase64"), c.userDataBase64)...)
	errs = append(errs, validateBase64(p.Child("networkDataBase64"), c.networkDataBase64)...)
	if c.userDataSecretRef != nil && c.userDataSecretRef.Name == "" {
		errs = append(errs, field.Required(p.Child("secretRef", "name"), "name the Secret holding the user data"))
	}
	if c.networkDataSecretRef != nil && c.networkDataSecretRef.Name == "" {
		errs = append(errs, field.Required(p.Child("networkDataSecretRef", "name"), "name the Secret holding the network data"))
	}
	hasUserData := c.userData != "" || c.userDataBase64 != "" || c.userDataSecretRef != nil
	hasNetworkData := c.networkData != "" || c.networkDataBase64 != "" || c.networkDataSecretRef != nil
	if !hasUserData && !hasNetworkData {
		errs = append(errs, field.Required(p.Child("userData"), "cloud-init needs data: set userData, userDataBase64 or secretRef (or network data)"))
	}
	return errs
}

// validateBase64 checks an optional value is standard base64. The value is
// left out of the error: user data often holds secrets.
func validateBase64(p *field.Path, value string) field.ErrorList {
	if value == "" {
		return nil
	}
	if _, err := base64.StdEncoding.DecodeString(value); err != nil {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be standard base64 (RFC 4648, with padding): "+err.Error())}
	}
	return nil
}

// --- interfaces and networks ---

// validateInterfaces checks interface names, that each names a network, and
// each interface's binding, MAC address, PCI address and ports.
func validateInterfaces(ifacesPath *field.Path, ifaces []Interface, networks []Network, networksPath *field.Path) field.ErrorList {
	byName := make(map[string]*Network, len(networks))
	for i := range networks {
		if _, dup := byName[networks[i].Name]; !dup {
			byName[networks[i].Name] = &networks[i]
		}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range ifaces {
		iface := &ifaces[i]
		p := ifacesPath.Index(i)
		errs = append(errs, validateInterfaceName(p.Child("name"), iface.Name, seen)...)
		network, found := byName[iface.Name]
		if iface.Name != "" && !found {
			errs = append(errs, withDetail(field.NotFound(p.Child("name"), iface.Name), fmt.Sprintf("no network of this name in %s", networksPath)))
		}
		errs = append(errs, validateOneOf(p, "binding", bindings(&iface.InterfaceBindingMethod), false)...)
		if iface.Masquerade != nil && found && network.Pod == nil && network.Multus != nil {
			errs = append(errs, field.Forbidden(p.Child("masquerade"), fmt.Sprintf("masquerade works only on the pod network, and network %q is a multus network", network.Name)))
		}
		if iface.PasstBinding != nil && found && network.Pod == nil && network.Multus != nil {
			errs = append(errs, field.Forbidden(p.Child("passtBinding"), fmt.Sprintf("passtBinding works only on the pod network, and network %q is a multus network", network.Name)))
		}
		errs = append(errs, validateMACAddress(p.Child("macAddress"), iface.MacAddress)...)
		errs = append(errs, validatePCIAddress(p.Child("pciAddress"), iface.PciAddress)...)
		errs = append(errs, validatePorts(p.Child("ports"), iface.Ports)...)
		if iface.DHCPOptions != nil {
			errs = append(errs, validateDHCPOptions(p.Child("dhcpOptions"), iface.DHCPOptions)...)
		}
	}
	return errs
}

// ValidateDHCPOptions checks an interface's dhcpOptions as KubeVirt's
// webhook does (NTP servers are IPv4 addresses, private options are 224 to
// 254 and each given once), and that each fits a DHCP option (255 bytes).
// Its errors' fields are relative to dhcpOptions.
func ValidateDHCPOptions(o *DHCPOptions) field.ErrorList {
	return validateDHCPOptions(nil, o)
}

func validateDHCPOptions(p *field.Path, o *DHCPOptions) field.ErrorList {
	var errs field.ErrorList
	const maxOption = 255
	if len(o.BootFileName) > maxOption {
		errs = append(errs, field.TooLong(p.Child("bootFileName"), o.BootFileName, maxOption))
	}
	if len(o.TFTPServerName) > maxOption {
		errs = append(errs, field.TooLong(p.Child("tftpServerName"), o.TFTPServerName, maxOption))
	}
	for i, s := range o.NTPServers {
		if ip := net.ParseIP(s); ip == nil || ip.To4() == nil {
			errs = append(errs, field.Invalid(p.Child("ntpServers").Index(i), s, "NTP servers must be IPv4 addresses"))
		}
	}
	if 4*len(o.NTPServers) > maxOption {
		errs = append(errs, field.TooMany(p.Child("ntpServers"), len(o.NTPServers), maxOption/4))
	}
	seen := map[int32]bool{}
	for i, po := range o.PrivateOptions {
		pp := p.Child("privateOptions").Index(i)
		switch {
		case po.Option < 224 || po.Option > 254:
			errs = append(errs, field.Invalid(pp.Child("option"), po.Option, "private DHCP options are 224 to 254"))
		case seen[po.Option]:
			errs = append(errs, field.Duplicate(pp.Child("option"), po.Option))
		}
		seen[po.Option] = true
		if len(po.Value) > maxOption {
			errs = append(errs, field.TooLong(pp.Child("value"), po.Value, maxOption))
		}
	}
	return errs
}

// bindings lists an interface's bindings in the order of the API.
func bindings(b *InterfaceBindingMethod) []setField {
	return []setField{
		{"bridge", b.Bridge != nil},
		{"slirp", b.Slirp != nil},
		{"masquerade", b.Masquerade != nil},
		{"sriov", b.SRIOV != nil},
		{"macvtap", b.Macvtap != nil},
		{"passt", b.Passt != nil},
		{"passtBinding", b.PasstBinding != nil},
		{"binding", b.Binding != nil},
	}
}

// validateMACAddress checks an optional MAC address is a 6-byte (EUI-48) address.
func validateMACAddress(p *field.Path, mac string) field.ErrorList {
	if mac == "" {
		return nil
	}
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return field.ErrorList{field.Invalid(p, mac, "must be a 6-byte MAC address such as 02:00:00:00:00:01")}
	}
	return nil
}

// validatePorts checks port numbers and protocols. A port listed twice is
// admitted, as KubeVirt admits it (the launcher pod lists it twice, which
// the API server only warns of).
func validatePorts(portsPath *field.Path, ports []Port) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := portsPath.Index(i)
		switch port.Protocol {
		case "", "TCP", "UDP":
		default:
			errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, []string{"TCP", "UDP"}))
		}
		if port.Port < 1 || port.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port, "must be between 1 and 65535"))
		}
	}
	return errs
}

// validateNetworks checks network names, that each network has exactly one
// source, and that the guest has at most one pod network and one multus
// default network, not both.
func validateNetworks(networksPath *field.Path, networks []Network) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	var podPath, multusDefaultPath *field.Path
	for i := range networks {
		n := &networks[i]
		p := networksPath.Index(i)
		errs = append(errs, validateInterfaceName(p.Child("name"), n.Name, seen)...)
		errs = append(errs, validateOneOf(p, "network source", []setField{
			{"pod", n.Pod != nil}, {"multus", n.Multus != nil},
		}, true)...)
		if n.Pod != nil {
			if podPath != nil {
				errs = append(errs, field.Forbidden(p.Child("pod"), fmt.Sprintf("a guest has at most one pod network, and %s already is one", podPath)))
			} else {
				podPath = p
			}
		}
		if n.Multus == nil {
			continue
		}
		if n.Multus.NetworkName == "" {
			errs = append(errs, field.Required(p.Child("multus", "networkName"), "name the NetworkAttachmentDefinition, as <name> or <namespace>/<name>"))
		}
		if n.Multus.Default {
			if multusDefaultPath != nil {
				errs = append(errs, field.Forbidden(p.Child("multus", "default"), fmt.Sprintf("a guest has at most one multus default network, and %s already is one", multusDefaultPath)))
			} else {
				multusDefaultPath = p
			}
		}
	}
	if podPath != nil && multusDefaultPath != nil {
		errs = append(errs, field.Forbidden(multusDefaultPath.Child("multus", "default"),
			fmt.Sprintf("a multus default network replaces the pod network, so it cannot be combined with the pod network %s", podPath)))
	}
	return errs
}

// --- boot order, grace period ---

// validateBootOrders checks boot orders are at least 1 and unique across
// disks and interfaces.
func validateBootOrders(devicesPath *field.Path, disks []Disk, ifaces []Interface) field.ErrorList {
	var errs field.ErrorList
	first := map[uint]*field.Path{}
	check := func(p *field.Path, order *uint) {
		if order == nil {
			return
		}
		if *order < 1 {
			errs = append(errs, field.Invalid(p, *order, "must be 1 or more (1 boots first)"))
			return
		}
		if prev, ok := first[*order]; ok {
			errs = append(errs, withDetail(field.Duplicate(p, *order), fmt.Sprintf("boot order %d is already used by %s", *order, prev)))
			return
		}
		first[*order] = p
	}
	for i := range disks {
		check(devicesPath.Child("disks").Index(i).Child("bootOrder"), disks[i].BootOrder)
	}
	for i := range ifaces {
		check(devicesPath.Child("interfaces").Index(i).Child("bootOrder"), ifaces[i].BootOrder)
	}
	return errs
}

func validateTerminationGracePeriod(p *field.Path, seconds *int64) field.ErrorList {
	if seconds != nil && *seconds < 0 {
		return field.ErrorList{field.Invalid(p, *seconds, "must be 0 or more seconds")}
	}
	return nil
}

// --- VirtualMachine ---

// knownRunStrategies lists the run strategies a VM may ask for.
// --- probes ---

// ProbeStartupDelay is what the launcher pod's probes add to a VMI probe's
// initialDelaySeconds (KubeVirt's LibvirtStartupDelay): the time libvirt
// needs to start the guest.
const ProbeStartupDelay = 10

// validateProbe checks a readiness or liveness probe as KubeVirt's webhook
// and the pod validation of the launcher pod it becomes would: exactly one
// check, ports that exist, non-negative timings, and a liveness probe's
// successThreshold of 1. A check through the pod network (httpGet,
// tcpSocket) needs the guest on the pod network.
func validateProbe(p *field.Path, probe *Probe, liveness bool, spec *VirtualMachineInstanceSpec) field.ErrorList {
	if probe == nil {
		return nil
	}
	errs := validateOneOf(p, "check", []setField{
		{"exec", probe.Exec != nil},
		{"httpGet", probe.HTTPGet != nil},
		{"tcpSocket", probe.TCPSocket != nil},
		{"guestAgentPing", probe.GuestAgentPing != nil},
	}, true)
	if e := probe.Exec; e != nil && len(e.Command) == 0 {
		errs = append(errs, field.Required(p.Child("exec", "command"), "the command to run in the guest (through the guest agent) is required"))
	}
	podNetwork := false
	for _, n := range spec.Networks {
		podNetwork = podNetwork || n.Pod != nil
	}
	ports := map[string]bool{}
	for _, iface := range spec.Domain.Devices.Interfaces {
		for _, port := range iface.Ports {
			if port.Name != "" {
				ports[port.Name] = true
			}
		}
	}
	if g := probe.HTTPGet; g != nil {
		gp := p.Child("httpGet")
		errs = append(errs, validateProbePort(gp.Child("port"), g.Port, ports)...)
		switch g.Scheme {
		case "", corev1.URISchemeHTTP, corev1.URISchemeHTTPS:
		default:
			errs = append(errs, field.NotSupported(gp.Child("scheme"), g.Scheme, []string{string(corev1.URISchemeHTTP), string(corev1.URISchemeHTTPS)}))
		}
		if g.Path != "" && !strings.HasPrefix(g.Path, "/") {
			errs = append(errs, field.Invalid(gp.Child("path"), g.Path, "must be an absolute URL path (start with /)"))
		}
		for i, h := range g.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				errs = append(errs, field.Invalid(gp.Child("httpHeaders").Index(i).Child("name"), h.Name, msg))
			}
		}
		if !podNetwork {
			errs = append(errs, field.Forbidden(gp, "an httpGet probe reaches the guest through the pod network, and the VMI has no pod network (networks[*].pod)"))
		}
	}
	if t := probe.TCPSocket; t != nil {
		tp := p.Child("tcpSocket")
		errs = append(errs, validateProbePort(tp.Child("port"), t.Port, ports)...)
		if !podNetwork {
			errs = append(errs, field.Forbidden(tp, "a tcpSocket probe reaches the guest through the pod network, and the VMI has no pod network (networks[*].pod)"))
		}
	}
	for _, n := range []struct {
		name  string
		value *int32
		max   int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds, math.MaxInt32 - ProbeStartupDelay},
		{"timeoutSeconds", probe.TimeoutSeconds, math.MaxInt32 - 1},
		{"periodSeconds", probe.PeriodSeconds, math.MaxInt32},
		{"successThreshold", probe.SuccessThreshold, math.MaxInt32},
		{"failureThreshold", probe.FailureThreshold, math.MaxInt32},
	} {
		if n.value != nil && (*n.value < 0 || *n.value > n.max) {
			errs = append(errs, field.Invalid(p.Child(n.name), *n.value, fmt.Sprintf("must be between 0 and %d", n.max)))
		}
	}
	if liveness && probe.SuccessThreshold != nil && *probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), *probe.SuccessThreshold, "must be 1 for a liveness probe (one success makes the guest live)"))
	}
	return errs
}

// validateProbePort checks a probe's port: a number between 1 and 65535 or
// the name of a port of the VMI's interfaces (the launcher pod's compute
// container exposes those).
func validateProbePort(p *field.Path, port intstr.IntOrString, names map[string]bool) field.ErrorList {
	if port.Type == intstr.String {
		if port.StrVal == "" {
			return field.ErrorList{field.Required(p, "a port number or the name of a port of the VMI's interfaces (domain.devices.interfaces[*].ports) is required")}
		}
		if !names[port.StrVal] {
			return field.ErrorList{field.Invalid(p, port.StrVal, "no port of this name in the VMI's interfaces (domain.devices.interfaces[*].ports)")}
		}
		return nil
	}
	if port.IntVal < 1 || port.IntVal > 65535 {
		return field.ErrorList{field.Invalid(p, port.IntVal, "must be between 1 and 65535")}
	}
	return nil
}

func knownRunStrategies() []VirtualMachineRunStrategy {
	return []VirtualMachineRunStrategy{
		RunStrategyAlways, RunStrategyRerunOnFailure, RunStrategyManual,
		RunStrategyHalted, RunStrategyOnce, RunStrategyWaitAsReceiver,
	}
}

// validateRunStrategy checks a VM sets at most one of running and
// runStrategy, and a known run strategy.
func validateRunStrategy(specPath *field.Path, spec *VirtualMachineSpec) field.ErrorList {
	var errs field.ErrorList
	if spec.Running != nil && spec.RunStrategy != nil {
		errs = append(errs, field.Forbidden(specPath.Child("running"),
			fmt.Sprintf("%s and %s are mutually exclusive: remove the deprecated %s", specPath.Child("running"), specPath.Child("runStrategy"), specPath.Child("running"))))
	}
	if s := spec.RunStrategy; s != nil && !contains(knownRunStrategies(), *s) {
		errs = append(errs, field.NotSupported(specPath.Child("runStrategy"), *s, knownRunStrategies()))
	}
	return errs
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// --- VirtualMachineInstanceReplicaSet ---

// validateReplicaSetSelector checks the selector is set, not empty and valid.
func validateReplicaSetSelector(p *field.Path, sel *metav1.LabelSelector) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(p, "a replica set needs a selector matching its template's labels")}
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return field.ErrorList{field.Invalid(p, sel, "must not be empty: an empty selector matches every VirtualMachineInstance in the namespace")}
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p)
}

// validateSelectorMatchesTemplate checks the (valid) selector selects the
// instances the template creates.
func validateSelectorMatchesTemplate(specPath *field.Path, sel *metav1.LabelSelector, tmpl *VirtualMachineInstanceTemplateSpec) field.ErrorList {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return field.ErrorList{field.Invalid(specPath.Child("selector"), sel, err.Error())}
	}
	if !selector.Matches(labels.Set(tmpl.ObjectMeta.Labels)) {
		return field.ErrorList{field.Invalid(specPath.Child("template", "metadata", "labels"), tmpl.ObjectMeta.Labels,
			fmt.Sprintf("must match %s (%s), or the replica set would never see the instances it creates", specPath.Child("selector"), selector))}
	}
	return nil
}

// --- KubeVirt ---

func validateUninstallStrategy(p *field.Path, s KubeVirtUninstallStrategy) field.ErrorList {
	known := []KubeVirtUninstallStrategy{KubeVirtUninstallStrategyRemoveWorkloads, KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist}
	if s == "" || contains(known, s) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, s, known)}
}

func validatePullPolicy(p *field.Path, policy corev1.PullPolicy) field.ErrorList {
	known := []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	if policy == "" || contains(known, policy) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, policy, known)}
}

// validateFeatureGates checks feature gates are non-empty and listed once.
func validateFeatureGates(p *field.Path, gates []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, g := range gates {
		switch {
		case strings.TrimSpace(g) == "":
			errs = append(errs, field.Required(p.Index(i), "a feature gate needs a name"))
		case seen[g]:
			errs = append(errs, field.Duplicate(p.Index(i), g))
		}
		seen[g] = true
	}
	return errs
}
