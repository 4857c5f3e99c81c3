//go:build !linux

package testenv

import "errors"

// AttachLoop needs Linux's loop devices.
func AttachLoop(file string) (string, error) {
	return "", errors.New("loop devices need Linux")
}

// detachLoops has nothing to detach outside Linux.
func detachLoops(match func(backing string) bool) error { return nil }
