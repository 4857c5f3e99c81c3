//go:build !linux

package testenv

import "syscall"

// killWithParent has no parent-death signal to ask for outside Linux; Stop
// still ends every process.
func killWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
