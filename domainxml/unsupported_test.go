package domainxml

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestUnsupportedIsReportedNotDropped: a VMI asking for what vmkit cannot
// do gets one NotSupported error per field from Validate, and Convert
// refuses it naming the first instead of leaving the devices out.
func TestUnsupportedIsReportedNotDropped(t *testing.T) {
	vmi := newVMI(func(vmi *v1.VirtualMachineInstance) {
		d := &vmi.Spec.Domain.Devices
		d.GPUs = []v1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/GP102GL_Tesla_P40"}}
		d.HostDevices = []v1.HostDevice{{Name: "nic", DeviceName: "intel.com/sriov"}}
		d.Sound = &v1.SoundDevice{Name: "audio"}
		d.Filesystems = []v1.Filesystem{{Name: "shared"}}
		vmi.Spec.Domain.Chassis = &v1.Chassis{Asset: "a1"}
	})
	want := []string{
		"spec.domain.chassis",
		"spec.domain.devices.gpus",
		"spec.domain.devices.hostDevices",
		"spec.domain.devices.sound",
		"spec.domain.devices.filesystems",
	}
	errs := Validate(vmi, true)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate's fields (-want +got):\n%s\n%v", diff, errs)
	}
	if !OnlyUnsupported(errs) {
		t.Errorf("OnlyUnsupported(%v) = false, want true", errs)
	}
	_, err := Convert(vmi, Options{Emulation: true})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "spec.domain.chassis" || !fe.Unsupported {
		t.Fatalf("Convert = %v, want an unsupported-field error naming spec.domain.chassis", err)
	}

	// Every TPM is given: one turned off (what removes a preference's TPM)
	// asks for nothing, a persistent one keeps its state on the VM's
	// backend-storage claim.
	off := false
	for _, tpm := range []*v1.TPMDevice{{Enabled: &off}, {Enabled: &off, Persistent: v1.BoolPtr(true)}, {}, {Persistent: &off}, {Persistent: v1.BoolPtr(true)}} {
		vmi = newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Devices.TPM = tpm })
		if errs := Unsupported(vmi); len(errs) != 0 {
			t.Errorf("Unsupported of TPM %+v = %v", tpm, errs)
		}
	}
}

// TestOnlyUnsupportedTellsMistakes: a spec error (here an invalid disk
// bus) is not "unsupported", so virt-api still refuses it.
func TestOnlyUnsupportedTellsMistakes(t *testing.T) {
	vmi := newVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "floppy"}}}}
		vmi.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{}}}}
	})
	errs := Validate(vmi, true)
	if len(errs) == 0 || OnlyUnsupported(errs) {
		t.Fatalf("Validate = %v, want a spec error that is not merely unsupported", errs)
	}
	if OnlyUnsupported(nil) {
		t.Error("OnlyUnsupported(nil) = true")
	}
}
