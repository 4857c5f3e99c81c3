package domainxml

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Validate reports what would keep vmi from running on any node: what
// v1.ValidateVirtualMachineInstance rejects, the fields vmkit cannot honour
// yet (Unsupported: every one, each of type NotSupported) and what Convert
// rejects, as field errors naming the field. Admission (virt-api's webhook) and the VMI
// controller (before it creates a launcher pod) call it, so a VMI that
// passes never gets a pod only to fail its domain conversion there.
//
// What only the API server or the node knows is filled in with values that
// always convert: the UID and name when not assigned yet, host CPUs for
// dedicated placement, and a block device for every volume a LUN uses
// (whether a claim is a block volume is checked on the node).
// emulation validates for QEMU's TCG emulator (a cluster with
// useEmulation), which rejects a few KVM-only features.
func Validate(vmi *v1.VirtualMachineInstance, emulation bool) field.ErrorList {
	if vmi == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "a VirtualMachineInstance is required")}
	}
	if errs := v1.ValidateVirtualMachineInstance(vmi); len(errs) > 0 {
		return errs
	}
	if errs := Unsupported(vmi); len(errs) > 0 {
		// Valid, but not something vmkit runs yet: every such field,
		// each an error of type NotSupported (OnlyUnsupported tells).
		return errs
	}
	if vmi.UID == "" || vmi.Name == "" {
		// Not yet assigned by the API server (a create, or generateName):
		// any valid value converts the same way.
		vmi = vmi.DeepCopy()
		if vmi.UID == "" {
			vmi.UID = "00000000-0000-4000-8000-000000000000"
		}
		if vmi.Name == "" {
			vmi.Name = vmi.GenerateName + "validate"
		}
	}
	opts := Options{Emulation: emulation, Disks: map[string]DiskSource{}}
	if cpu := vmi.Spec.Domain.CPU; cpu != nil && cpu.DedicatedCPUPlacement {
		// One host CPU per vCPU and one for the emulator thread, however
		// many vCPUs the spec asks for (Convert checks the count is sane).
		n := uint(cpu.Sockets)*uint(cpu.Cores)*uint(cpu.Threads) + 1
		if n < 2 || n > 4097 {
			n = 4097
		}
		for i := range n {
			opts.CPUSet = append(opts.CPUSet, i)
		}
	}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.LUN != nil {
			opts.Disks[d.Name] = DiskSource{Path: "/dev/vmkit-validate-" + d.Name, Block: true}
		}
	}
	if _, err := Convert(vmi, opts); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return field.ErrorList{field.Invalid(field.NewPath(fe.Field), field.OmitValueType{}, fe.Message)}
		}
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return nil
}

// ValidateAdmission is Validate, except that more vCPUs than vmkit runs
// (more than 512) are a warning, not an error: KubeVirt's webhook admits any
// count (sockets × cores × threads, maxSockets × cores × threads, or the
// CPU request without a topology) and its launcher pod then stays
// unscheduled. The rest of the spec is validated as it would be with one
// vCPU, so a mistake besides is still refused. virt-api's admission and
// virt-controller's check before it makes a launcher pod use it, so such a
// VMI gets its pod and shows ErrorUnschedulable, as on KubeVirt. KubeVirt's own CPU rules
// (sockets at most maxSockets, ...) are v1 validation's, which sees the
// spec as it is.
func ValidateAdmission(vmi *v1.VirtualMachineInstance, emulation bool) (errs, warnings field.ErrorList) {
	errs = Validate(vmi, emulation)
	if len(errs) != 1 || !isVCPUCountError(errs[0]) {
		return errs, nil
	}
	one := vmi.DeepCopy()
	cpu := one.Spec.Domain.CPU
	if cpu == nil {
		cpu = &v1.CPU{}
		one.Spec.Domain.CPU = cpu
	}
	cpu.Sockets, cpu.Cores, cpu.Threads, cpu.MaxSockets = 1, 1, 1, 0
	over := errs[0]
	what := ": admitted, as KubeVirt admits it, but vmkit's launcher runs at most 512 vCPUs: the VMI gets a launcher pod asking for that many CPUs, which stays unscheduled where no node has them (the VM's printableStatus ErrorUnschedulable, as on KubeVirt) and fails to start where one does"
	if over.Field == MaxSocketsField {
		what = ": admitted, as KubeVirt admits it, but vmkit's launcher runs at most 512 vCPUs: the VMI stays Pending (condition Synchronized=False, reason InvalidSpec)"
	}
	warning := field.Invalid(field.NewPath(over.Field), field.OmitValueType{}, over.Detail+what)
	return Validate(one, emulation), field.ErrorList{warning}
}

// MaxSocketsField is the field ValidateAdmission's warning names when
// spec.domain.cpu.maxSockets may grow the guest past 512 vCPUs: such a VMI
// still gets no launcher pod (its CPU request is small, so the pod would
// schedule and the launcher fail).
const MaxSocketsField = "spec.domain.cpu.maxSockets"

// isVCPUCountError reports whether e is domainxml's refusal of a vCPU count
// above what a node runs: an Invalid error on spec.domain.cpu (the count)
// or spec.domain.cpu.maxSockets (the count it may grow to; maxSockets
// below sockets is v1 validation's error, on spec.domain.cpu.sockets).
func isVCPUCountError(e *field.Error) bool {
	return e.Type == field.ErrorTypeInvalid && !IsUnsupported(e) &&
		(e.Field == "spec.domain.cpu" || e.Field == MaxSocketsField)
}
