package domainxml

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmkit/vmkit/domainxml/internal/unsupported"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Unsupported lists the fields of vmi that vmkit accepts (they are
// KubeVirt's and valid) but cannot honour yet: devices the nodes cannot
// give (GPUs, host devices), bindings and features the launcher
// does not implement. Each is a field.Error of type
// field.ErrorTypeNotSupported naming the field. Convert refuses a VMI with
// any of them (the first, as a *FieldError with Unsupported set), so none
// is ever dropped from a domain silently; virt-api admits such a VMI with
// a warning per field, and the VMI controller holds it in Pending with a
// Synchronized=False condition (reason Unsupported) and an event naming
// the fields, instead of starting a launcher.
func Unsupported(vmi *v1.VirtualMachineInstance) field.ErrorList {
	return unsupported.Fields(vmi)
}

// unsupportedPrefix starts the detail of every error Unsupported returns,
// which tells them from validation's NotSupported errors (a value outside
// an enum).
const unsupportedPrefix = unsupported.Prefix

// IsUnsupported reports whether e is one of Unsupported's errors: vmkit
// cannot do it yet, the spec is not wrong.
func IsUnsupported(e *field.Error) bool {
	return e != nil && e.Type == field.ErrorTypeNotSupported && strings.HasPrefix(e.Detail, unsupportedPrefix)
}

// OnlyUnsupported reports whether errs is not empty and every error of it
// is one of Unsupported's.
func OnlyUnsupported(errs field.ErrorList) bool {
	for _, e := range errs {
		if !IsUnsupported(e) {
			return false
		}
	}
	return len(errs) > 0
}
