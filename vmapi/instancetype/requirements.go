package instancetype

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// UnmetError is a preference's requirement (or its spread topology) that a
// VM does not meet. Fields are the VM's fields that fall short.
type UnmetError struct {
	Fields  []*field.Path
	Message string
}

func (e *UnmetError) Error() string { return e.Message }

// CheckRequirements checks a VM's instance type (nil for none) and template
// spec against its preference's requirements, as KubeVirt's VM admission
// does: the instance type's vCPUs and memory when there is one, else the
// template's CPU topology (counted as the preferred topology says) and
// guest memory; and the template's architecture. It returns an *UnmetError.
func CheckRequirements(it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec, spec *v1.VirtualMachineInstanceSpec) error {
	if pref == nil || pref.Requirements == nil {
		return nil
	}
	req := pref.Requirements
	tmpl := field.NewPath("spec", "template", "spec")
	if req.CPU != nil {
		if err := checkCPU(it, pref, spec, tmpl.Child("domain", "cpu")); err != nil {
			return err
		}
	}
	if req.Memory != nil {
		provided, f, what := resource.MustParse("0Mi"), tmpl.Child("domain", "memory"), "VirtualMachine"
		if it != nil {
			provided, f, what = it.Memory.Guest, field.NewPath("spec", "instancetype"), "instance type"
		}
		if spec.Domain.Memory != nil && spec.Domain.Memory.Guest != nil {
			provided = *spec.Domain.Memory.Guest
		}
		if provided.Cmp(req.Memory.Guest) < 0 {
			return &UnmetError{Fields: []*field.Path{f}, Message: fmt.Sprintf("insufficient Memory resources of %s provided by %s, preference requires %s", provided.String(), what, req.Memory.Guest.String())}
		}
	}
	if req.Architecture != nil && spec.Architecture != *req.Architecture {
		return &UnmetError{Fields: []*field.Path{tmpl.Child("architecture")}, Message: fmt.Sprintf("preference requires architecture %s but %s is being requested", *req.Architecture, spec.Architecture)}
	}
	return nil
}

func checkCPU(it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec, spec *v1.VirtualMachineInstanceSpec, cpuPath *field.Path) error {
	need := pref.Requirements.CPU.Guest
	if it != nil {
		if it.CPU.Guest < need {
			return &UnmetError{Fields: []*field.Path{field.NewPath("spec", "instancetype")}, Message: fmt.Sprintf("insufficient CPU resources of %d vCPU provided by instance type, preference requires %d vCPU", it.CPU.Guest, need)}
		}
		return nil
	}
	cpu := spec.Domain.CPU
	if cpu == nil {
		return &UnmetError{Fields: []*field.Path{cpuPath}, Message: fmt.Sprintf("no CPU resources provided by VirtualMachine, preference requires %d vCPU", need)}
	}
	short := func(have uint32, as string, fields ...string) error {
		if have >= need {
			return nil
		}
		e := &UnmetError{Message: fmt.Sprintf("insufficient CPU resources of %d vCPU provided by VirtualMachine, preference requires %d vCPU provided as %s", have, need, as)}
		for _, f := range fields {
			e.Fields = append(e.Fields, cpuPath.Child(f))
		}
		return e
	}
	switch PreferredTopology(pref) {
	case instancetypev1beta1.DeprecatedPreferThreads, instancetypev1beta1.Threads:
		return short(cpu.Threads, "threads", "threads")
	case instancetypev1beta1.DeprecatedPreferCores, instancetypev1beta1.Cores:
		return short(cpu.Cores, "cores", "cores")
	case instancetypev1beta1.DeprecatedPreferSockets, instancetypev1beta1.Sockets:
		return short(cpu.Sockets, "sockets", "sockets")
	case instancetypev1beta1.DeprecatedPreferAny, instancetypev1beta1.Any:
		return short(cpu.Cores*cpu.Sockets*cpu.Threads, "cores, sockets and threads", "cores", "sockets", "threads")
	case instancetypev1beta1.DeprecatedPreferSpread, instancetypev1beta1.Spread:
		switch _, across := SpreadOptions(pref); across {
		case instancetypev1beta1.SpreadAcrossCoresThreads:
			return short(cpu.Cores*cpu.Threads, string(across), "cores", "threads")
		case instancetypev1beta1.SpreadAcrossSocketsCoresThreads:
			return short(cpu.Sockets*cpu.Cores*cpu.Threads, string(across), "sockets", "cores", "threads")
		default:
			return short(cpu.Sockets*cpu.Cores, string(across), "sockets", "cores")
		}
	}
	return nil
}

// CheckSpreadTopology checks that an instance type's vCPUs divide evenly
// under a preference's spread topology, as KubeVirt's VM admission does. It
// returns an *UnmetError naming the instance type's spec.cpu.guest.
func CheckSpreadTopology(it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) error {
	topology := PreferredTopology(pref)
	if it == nil || (topology != instancetypev1beta1.Spread && topology != instancetypev1beta1.DeprecatedPreferSpread) {
		return nil
	}
	guest := it.CPU.Guest
	unmet := func(format string, args ...any) error {
		return &UnmetError{Fields: []*field.Path{field.NewPath("instancetype", "spec", "cpu", "guest")}, Message: fmt.Sprintf(format, args...)}
	}
	switch ratio, across := SpreadOptions(pref); across {
	case instancetypev1beta1.SpreadAcrossSocketsCores:
		if ratio == 0 || guest%ratio > 0 {
			return unmet("%d vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of %d provided by the preference", guest, ratio)
		}
	case instancetypev1beta1.SpreadAcrossCoresThreads:
		if ratio == 0 || guest%ratio > 0 {
			return unmet("%d vCPUs provided by the instance type are not divisible by the number of threads per core %d", guest, ratio)
		}
	case instancetypev1beta1.SpreadAcrossSocketsCoresThreads:
		const threadsPerCore = 2
		if ratio == 0 || guest%threadsPerCore > 0 || (guest/threadsPerCore)%ratio > 0 {
			return unmet("%d vCPUs provided by the instance type are not divisible by the number of threads per core %d and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of %d", guest, threadsPerCore, ratio)
		}
	}
	return nil
}
