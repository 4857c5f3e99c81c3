package domainxml

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// withRoot gives the VMI a container disk "root" on virtio.
func withRoot(vmi *v1.VirtualMachineInstance) {
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "root"})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "root", VolumeSource: v1.VolumeSource{
		ContainerDisk: &v1.ContainerDiskSource{Image: "example/root"}}})
}

// withHotplugDisk adds a hotpluggable claim volume "data" and its disk on
// the given bus after the VMI's disks.
func withHotplugDisk(bus v1.DiskBus) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks,
			v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: bus}}})
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{Hotpluggable: true,
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-claim"}}}})
	}
}

func TestConvertLeavesHotplugDisksForLater(t *testing.T) {
	vmi := newVMI(withRoot, withHotplugDisk(v1.DiskBusSCSI))
	dom, err := Convert(vmi, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dom.Devices.Disks {
		if d.Alias != nil && d.Alias.Name == "ua-data" {
			t.Fatalf("the hotpluggable volume's disk is in the domain before anything attached it: %+v", d)
		}
	}
	disk, err := HotplugDisk(vmi, "data", DiskSource{Path: "/var/run/kubevirt/hotplug-disks/data/disk.img"}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if disk.Target.Dev != "sda" || disk.Target.Bus != "scsi" || disk.Source.File.File != "/var/run/kubevirt/hotplug-disks/data/disk.img" || disk.Driver.Type != "raw" {
		t.Errorf("hotplug disk: target %+v, source %+v, driver %+v", disk.Target, disk.Source.File, disk.Driver)
	}
	// sda taken by a disk attached before: the next free SCSI name.
	disk, err = HotplugDisk(vmi, "data", DiskSource{Path: "/dev/data", Block: true}, Options{}, []string{"vda", "sda", "sdb"})
	if err != nil {
		t.Fatal(err)
	}
	if disk.Target.Dev != "sdc" || disk.Source.Block == nil || disk.Source.Block.Dev != "/dev/data" {
		t.Errorf("hotplug disk over a taken name: target %s, source %+v", disk.Target.Dev, disk.Source)
	}
}

func TestHotplugDiskRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, volume, want string
		vmi                *v1.VirtualMachineInstance
	}{
		{"SATA cannot be hot-plugged", "data", `spec.domain.devices.disks[1]: volume "data" is hotpluggable: its disk must be a disk or lun on bus scsi or virtio`, newVMI(withRoot, withHotplugDisk(v1.DiskBusSATA))},
		{"no such volume", "nope", `spec.volumes: no volume named "nope"`, newVMI(withRoot, withHotplugDisk(v1.DiskBusSCSI))},
		{"not hotpluggable", "root", `volume "root" is not a hotpluggable persistentVolumeClaim or dataVolume`, newVMI(withRoot, withHotplugDisk(v1.DiskBusSCSI))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HotplugDisk(tc.vmi, tc.volume, DiskSource{Path: "/x/disk.img"}, Options{}, nil)
			checkErr(t, err, tc.want)
		})
	}
}
