package domainxml

import "fmt"

// FieldError says which field of the VMI (or of Options) cannot be
// converted and why. Convert's errors are *FieldError; use errors.As to get
// the field.
type FieldError struct {
	// Field is the path of the offending field, for example
	// "spec.domain.devices.disks[1].lun".
	Field string
	// Message says what is wrong with it.
	Message string
	// Unsupported is set when the field is valid but vmkit cannot honour
	// it yet (see Unsupported).
	Unsupported bool
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// unsupportedf is fieldErrorf for what is valid but vmkit cannot honour
// yet, with Unsupported's wording.
func unsupportedf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: unsupportedPrefix + fmt.Sprintf(format, args...) + " yet", Unsupported: true}
}
