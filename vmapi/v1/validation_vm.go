package v1

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

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

// knownRunStrategies lists the run strategies a VM may ask for.
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
