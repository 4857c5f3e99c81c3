package v1

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
