// Package vmstate keeps a VMI's persistent state (its TPM's and its EFI
// variable store) on the VMI's backend-storage claim, mounted in the
// launcher's pod, as KubeVirt's launcher does.
package vmstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Dirs are where the backend-storage claim is mounted and where the
// hypervisor keeps TPM state, launcher.Config's fields of the same names.
type Dirs struct {
	// VMStateDir is where the VMI's backend-storage claim is mounted.
	VMStateDir string
	// SwtpmStorageDir is where the hypervisor keeps the state of emulated
	// TPMs.
	SwtpmStorageDir string
}

// Persist points the domain's persistent state at the VMI's
// backend-storage claim (d.VMStateDir), as KubeVirt's launcher does:
//
//   - a persistent TPM (devices.tpm.persistent): the hypervisor's TPM state
//     directory (d.SwtpmStorageDir) becomes a link to
//     <VMStateDir>/swtpm, where libvirt keeps the state under the domain's
//     UUID, the VM's firmware UUID, so the next VMI of the VM finds it;
//   - a persistent EFI variable store (firmware.bootloader.efi.persistent):
//     the store is <VMStateDir>/nvram/<namespace>_<name>_VARS.fd, which
//     libvirt creates from the firmware's template only when it is missing
//     and keeps when the domain is undefined (outside its own directory).
//
// A VMI without persistent state is left alone.
func (d Dirs) Persist(vmi *v1.VirtualMachineInstance, opts *domainxml.Options) error {
	spec := &vmi.Spec
	if !v1.NeedsBackendStorage(spec) {
		return nil
	}
	field := "spec.domain.firmware.bootloader.efi.persistent"
	if v1.PersistentTPM(spec) {
		field = "spec.domain.devices.tpm.persistent"
	}
	dir := d.VMStateDir
	if dir == "" {
		return fmt.Errorf("%s: the launcher has no backend storage (--vm-state-dir)", field)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: the backend-storage claim %s is not mounted at %s: %v", field, v1.BackendStorageClaimName(vmi.Name), dir, err)
	}
	if v1.PersistentTPM(spec) {
		if d.SwtpmStorageDir == "" {
			return fmt.Errorf("spec.domain.devices.tpm.persistent: the launcher does not know where the hypervisor keeps TPM state")
		}
		if err := linkDir(filepath.Join(dir, "swtpm"), d.SwtpmStorageDir); err != nil {
			return fmt.Errorf("spec.domain.devices.tpm.persistent: %w", err)
		}
	}
	if v1.PersistentEFI(spec) {
		nvram := filepath.Join(dir, "nvram")
		if err := os.MkdirAll(nvram, 0o700); err != nil {
			return fmt.Errorf("spec.domain.firmware.bootloader.efi.persistent: %w", err)
		}
		opts.Firmware.NVRAMDir = nvram
	}
	return nil
}

// linkDir creates directory target and makes link a symbolic link to it,
// replacing an empty directory (the one libvirt or the image may have made)
// but nothing holding state.
func linkDir(target, link string) error {
	if err := os.MkdirAll(target, 0o700); err != nil {
		return err
	}
	if dest, err := os.Readlink(link); err == nil {
		if dest == target {
			return nil
		}
		if err := os.Remove(link); err != nil {
			return err
		}
	} else if fi, err := os.Lstat(link); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", link)
		}
		// os.Remove removes only an empty directory.
		if err := os.Remove(link); err != nil {
			return fmt.Errorf("%s already holds TPM state that is not on the backend storage: %w", link, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return err
	}
	return os.Symlink(target, link)
}
