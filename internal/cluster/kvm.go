package cluster

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ForceEmulationEnv, when "1" or "true", makes the local cluster emulate
// guests (QEMU's TCG) even on a machine with KVM.
const ForceEmulationEnv = "VMKIT_USE_EMULATION"

// kvmAPIVersion is KVM_GET_API_VERSION's answer from every stable KVM.
const kvmAPIVersion = 12

// kvmGetAPIVersion is the ioctl KVM_GET_API_VERSION (_IO(KVMIO, 0x00)).
const kvmGetAPIVersion = 0xAE00

// KVM reports whether this machine's /dev/kvm works (it opens read-write
// and answers KVM_GET_API_VERSION with 12, as libvirt checks), and why
// not: the local cluster then runs guests on KVM, as a KubeVirt
// installation does on such nodes (useEmulation false), and emulates them
// only where it does not or ForceEmulationEnv asks.
func KVM() (bool, string) {
	if v := os.Getenv(ForceEmulationEnv); v == "1" || v == "true" {
		return false, ForceEmulationEnv + "=" + v
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	v, err := unix.IoctlRetInt(int(f.Fd()), kvmGetAPIVersion)
	if err != nil {
		return false, fmt.Sprintf("/dev/kvm: KVM_GET_API_VERSION: %v", err)
	}
	if v != kvmAPIVersion {
		return false, fmt.Sprintf("/dev/kvm: KVM API version %d, want %d", v, kvmAPIVersion)
	}
	return true, ""
}
