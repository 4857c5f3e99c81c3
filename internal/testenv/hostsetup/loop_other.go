//go:build !linux

package hostsetup

import "errors"

// AttachLoop needs Linux's loop devices.
func AttachLoop(file string) (string, error) {
	return "", errors.New("loop devices need Linux")
}

// DetachLoops has nothing to detach outside Linux.
func DetachLoops(match func(backing string) bool) error { return nil }
