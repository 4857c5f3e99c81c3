package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
)

// ForceEmulationEnv, when "1" or "true", makes the local cluster emulate
// guests (QEMU's TCG) even on a machine whose KVM works.
const ForceEmulationEnv = "VMKIT_USE_EMULATION"

const (
	// kvmAPIVersion is KVM_GET_API_VERSION's answer from every stable KVM.
	kvmAPIVersion = 12
	// kvmGetAPIVersion is the ioctl KVM_GET_API_VERSION (_IO(KVMIO, 0x00)).
	kvmGetAPIVersion = 0xAE00
	// kvmProbeTimeout bounds the probe guest's boot on KVM (well under a
	// second where KVM works; the same guest boots in about 4 s under TCG).
	kvmProbeTimeout = 15 * time.Second
)

var kvmProbe struct {
	once sync.Once
	ok   bool
	why  string
}

// KVM reports whether guests run on this machine's KVM, and why not: the
// local cluster then runs them there, as a KubeVirt installation does on a
// node with /dev/kvm (useEmulation false), and emulates them only where KVM
// does not work or ForceEmulationEnv asks. A /dev/kvm that opens and
// answers is not enough: on some (nested) machines its guests never get
// past the kernel's decompressor. So the test guest (hack/make-guest.sh)
// is booted once, by QEMU on KVM, and must print its marker. The answer is
// kept for the process.
func KVM() (bool, string) {
	if v := os.Getenv(ForceEmulationEnv); v == "1" || v == "true" {
		return false, ForceEmulationEnv + "=" + v
	}
	kvmProbe.once.Do(func() { kvmProbe.ok, kvmProbe.why = probeKVM() })
	return kvmProbe.ok, kvmProbe.why
}

func probeKVM() (bool, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false, err.Error()
	}
	v, err := unix.IoctlRetInt(int(f.Fd()), kvmGetAPIVersion)
	f.Close()
	if err != nil {
		return false, fmt.Sprintf("/dev/kvm: KVM_GET_API_VERSION: %v", err)
	}
	if v != kvmAPIVersion {
		return false, fmt.Sprintf("/dev/kvm: KVM API version %d, want %d", v, kvmAPIVersion)
	}
	dir := os.Getenv(libvirtenv.GuestDirEnv)
	if dir == "" {
		root, err := testenv.ModuleRoot()
		if err != nil {
			return false, fmt.Sprintf("no test guest to try KVM with: %v", err)
		}
		dir = filepath.Join(root, "_output", "guest")
	}
	kernel, initrd := filepath.Join(dir, "vmlinux"), filepath.Join(dir, "initramfs.cpio.gz")
	for _, p := range []string{kernel, initrd} {
		if _, err := os.Stat(p); err != nil {
			return false, fmt.Sprintf("no test guest to try KVM with (%v; hack/make-guest.sh builds it)", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvmProbeTimeout)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "qemu-system-x86_64", "-accel", "kvm", "-machine", "pc", "-cpu", "host", "-m", "128",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 panic=-1 quiet", "-display", "none", "-serial", "stdio",
		"-no-reboot", "-nodefaults").CombinedOutput()
	if bytes.Contains(out, []byte("GUEST-BOOTED")) {
		return true, ""
	}
	why := fmt.Sprintf("the test guest did not boot on KVM: %s", bytes.TrimSpace(out))
	if ctx.Err() != nil {
		why = fmt.Sprintf("/dev/kvm answers, but the test guest did not boot on it within %v", kvmProbeTimeout)
	}
	return false, why + pvmNote(pvmModuleDir)
}

// pvmModuleDir is where a kernel whose KVM is PVM shows its module.
const pvmModuleDir = "/sys/module/kvm_pvm"

// pvmNote says why guests fail on a PVM host, "" on any other. PVM
// ("Pagetable-based Virtual Machine", the kvm_pvm module) gives a machine
// without hardware virtualization a /dev/kvm: it runs guest kernels built
// for PVM at near-native speed, and has the host kernel emulate any other
// guest instruction by instruction (the test guest's Debian kernel clears
// its BSS for minutes). Such a host needs PVM guest kernels, which no
// distribution ships, so the local cluster emulates.
func pvmNote(dir string) string {
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return "; this host's KVM is PVM (" + dir + "), which runs only guest kernels built for PVM"
}
