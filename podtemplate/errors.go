package podtemplate

import "fmt"

// FieldError says which field of which object keeps the renderer from
// producing a valid pod. Its message reads
//
//	VirtualMachineInstance ns/name: spec.domain.devices.disks[2]: volume "x" not found
//
// so it can go unchanged into an event or a condition; errors.As gives the
// parts to callers that want them.
type FieldError struct {
	// Kind of the object, e.g. VirtualMachineInstance.
	Kind string
	// Namespace and Name of the object.
	Namespace, Name string
	// Field is the path of the offending field, e.g. spec.volumes[1].hostDisk.path.
	Field string
	// Detail says what is wrong with it.
	Detail string
	// Err is the underlying error, if any (for example from Config.ClaimVolumeMode).
	Err error
}

func (e *FieldError) Error() string {
	msg := e.Kind + " " + e.Namespace + "/" + e.Name + ": " + e.Field + ": " + e.Detail
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

const kindVMI = "VirtualMachineInstance"

// objectRef names the object errors are about.
type objectRef struct {
	kind, namespace, name string
}

// errorf returns a FieldError about field of o.
func (o objectRef) errorf(field, format string, args ...any) *FieldError {
	return &FieldError{Kind: o.kind, Namespace: o.namespace, Name: o.name, Field: field, Detail: fmt.Sprintf(format, args...)}
}
