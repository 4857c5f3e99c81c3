package testenv

import "syscall"

// killWithParent makes the kernel kill a child when the thread that started
// it exits, so a test binary killed by -timeout leaves no etcd or
// kube-apiserver behind.
func killWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
