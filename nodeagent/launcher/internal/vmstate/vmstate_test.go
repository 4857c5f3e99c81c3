package vmstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestPersistentState: a persistent TPM's state directory becomes a link
// to the backend storage (an empty directory libvirt made is replaced, one
// holding state is not), a persistent EFI store goes there too, and a VMI
// whose claim is not mounted fails naming the field.
func TestPersistentState(t *testing.T) {
	dir := t.TempDir()
	state, swtpm := filepath.Join(dir, "vm-state"), filepath.Join(dir, "config", "libvirt", "qemu", "swtpm")
	d := Dirs{VMStateDir: state, SwtpmStorageDir: swtpm}
	on := true
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	vmi.Spec.Domain.Devices.TPM = &v1.TPMDevice{Persistent: &on}

	var opts domainxml.Options
	err := d.Persist(vmi, &opts)
	if err == nil || !strings.HasPrefix(err.Error(), "spec.domain.devices.tpm.persistent: the backend-storage claim persistent-state-for-vm is not mounted at "+state) {
		t.Fatalf("without the claim mounted: %v", err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(swtpm, 0o700); err != nil { // libvirt made it, empty
		t.Fatal(err)
	}
	for range 2 { // idempotent: a launcher syncs again
		if err := d.Persist(vmi, &opts); err != nil {
			t.Fatal(err)
		}
		if dest, err := os.Readlink(swtpm); err != nil || dest != filepath.Join(state, "swtpm") {
			t.Fatalf("%s links to %q (%v), want %s/swtpm", swtpm, dest, err, state)
		}
	}
	if opts.Firmware.NVRAMDir != "" {
		t.Errorf("NVRAM dir %q without a persistent EFI store", opts.Firmware.NVRAMDir)
	}

	// State that is not on the backend storage is never thrown away.
	other := Dirs{VMStateDir: state, SwtpmStorageDir: filepath.Join(dir, "full")}
	if err := os.MkdirAll(filepath.Join(dir, "full", "some-uuid"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := other.Persist(vmi, &opts); err == nil || !strings.Contains(err.Error(), "already holds TPM state") {
		t.Errorf("over a directory holding state: %v", err)
	}

	efi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	efi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{Persistent: &on}}}
	opts = domainxml.Options{}
	if err := (Dirs{VMStateDir: state}).Persist(efi, &opts); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(state, "nvram"); opts.Firmware.NVRAMDir != want {
		t.Errorf("NVRAM dir %q, want %q", opts.Firmware.NVRAMDir, want)
	}
	if fi, err := os.Stat(opts.Firmware.NVRAMDir); err != nil || !fi.IsDir() {
		t.Errorf("NVRAM dir not created: %v", err)
	}
	if err := (Dirs{VMStateDir: state}).Persist(vmi, &opts); err == nil || !strings.Contains(err.Error(), "spec.domain.devices.tpm.persistent") {
		t.Errorf("a persistent TPM where the launcher does not know libvirt's TPM directory: %v", err)
	}
}
