package v1

import (
	"errors"
	"fmt"
	"strings"

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

// --- helpers ---

// withDetail adds an explanation to an error whose constructor takes none.
func withDetail(err *field.Error, detail string) *field.Error {
	err.Detail = detail
	return err
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

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
