package v1

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
