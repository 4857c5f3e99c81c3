package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// withDisk adds a disk and the volume backing it.
func withDisk(d v1.Disk, src v1.VolumeSource) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, d)
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: d.Name, VolumeSource: src})
	}
}

var (
	containerDisk = v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}
	pvc           = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}
	noCloud       = v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config"}}
)

func onBus(bus v1.DiskBus) v1.DiskDevice { return v1.DiskDevice{Disk: &v1.DiskTarget{Bus: bus}} }

func TestConvertDisks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		vmi           *v1.VirtualMachineInstance
		opts          Options
		want          []libvirtxml.DomainDisk
		wantIOThreads uint
		wantErr       string
	}{{
		name: "a container disk: qcow2 overlay in the ephemeral dir, virtio by default",
		vmi:  newVMI(withDisk(v1.Disk{Name: "root"}, containerDisk)),
		want: []libvirtxml.DomainDisk{{
			Device: "disk", Model: "virtio-non-transitional",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2", ErrorPolicy: "stop", Discard: "unmap"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: DefaultEphemeralDiskDir + "/disk-data/root/disk.qcow2"}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: "ua-root"},
		}},
	}, {
		name: "targets per prefix in spec order, boot order, serial",
		vmi: newVMI(
			withDisk(v1.Disk{Name: "a", DiskDevice: onBus(v1.DiskBusSATA)}, pvc),
			withDisk(v1.Disk{Name: "b", BootOrder: ptr(uint(1)), Serial: "S-1"}, pvc),
			withDisk(v1.Disk{Name: "c", DiskDevice: onBus(v1.DiskBusSCSI)}, pvc),
			withDisk(v1.Disk{Name: "d", DiskDevice: onBus(v1.DiskBusVirtio)}, pvc),
			withDisk(v1.Disk{Name: "e", DiskDevice: onBus(v1.DiskBusUSB)}, pvc),
		),
		opts: Options{PrivateDir: "/p"},
		want: []libvirtxml.DomainDisk{
			pvcDisk("a", "sda", "sata", ""),
			func() libvirtxml.DomainDisk {
				d := pvcDisk("b", "vda", "virtio", "virtio-non-transitional")
				d.Serial, d.Boot = "S-1", &libvirtxml.DomainDeviceBoot{Order: 1}
				return d
			}(),
			pvcDisk("c", "sdb", "scsi", ""),
			pvcDisk("d", "vdb", "virtio", "virtio-non-transitional"),
			pvcDisk("e", "sdc", "usb", ""),
		},
	}, {
		name: "a block PVC prepared by the launcher, transitional virtio",
		vmi: newVMI(withDisk(v1.Disk{Name: "db"}, pvc), func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.UseVirtioTransitional = ptr(true)
		}),
		opts: Options{Disks: map[string]DiskSource{"db": {Path: "/dev/db", Block: true}}},
		want: []libvirtxml.DomainDisk{{
			Device: "disk", Model: "virtio-transitional",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", ErrorPolicy: "stop", Discard: "unmap"},
			Source: &libvirtxml.DomainDiskSource{Block: &libvirtxml.DomainDiskSourceBlock{Dev: "/dev/db"}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: "ua-db"},
		}},
	}, {
		name: "cloud-init on a CD-ROM: read-only ISO, SATA by default",
		vmi:  newVMI(withDisk(v1.Disk{Name: "ci", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{}}}, noCloud)),
		want: []libvirtxml.DomainDisk{{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", ErrorPolicy: "stop"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: DefaultEphemeralDiskDir + "/cloud-init-data/ns/vm/noCloud.iso"}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
			Alias:    &libvirtxml.DomainAlias{Name: "ua-ci"},
		}},
	}, {
		name: "cloud-init ISO from Options on a virtio disk is read-only",
		vmi:  newVMI(withDisk(v1.Disk{Name: "ci"}, noCloud)),
		opts: Options{CloudInitISOs: map[string]string{"ci": "/run/ci.iso"}},
		want: []libvirtxml.DomainDisk{{
			Device: "disk", Model: "virtio-non-transitional",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", ErrorPolicy: "stop"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/run/ci.iso"}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
			Alias:    &libvirtxml.DomainAlias{Name: "ua-ci"},
		}},
	}, {
		name: "an empty disk, cache and I/O modes, an open tray",
		vmi: newVMI(
			withDisk(v1.Disk{Name: "scratch", Cache: v1.CacheWriteBack, IO: v1.IOThreads}, v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{}}),
			withDisk(v1.Disk{Name: "fast", IO: v1.IONative}, v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data/fast.img", Type: v1.HostDiskExists}}),
			withDisk(v1.Disk{Name: "iso", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusSCSI, Tray: v1.TrayStateOpen}}}, containerDisk),
		),
		want: []libvirtxml.DomainDisk{{
			Device: "disk", Model: "virtio-non-transitional",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2", Cache: "writeback", ErrorPolicy: "stop", IO: "threads", Discard: "unmap"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: DefaultEphemeralDiskDir + "/empty-disks/scratch.qcow2"}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: "ua-scratch"},
		}, {
			Device: "disk", Model: "virtio-non-transitional",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", Cache: "none", ErrorPolicy: "stop", IO: "native", Discard: "unmap"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: DefaultPrivateDir + "/vmi-disks/fast/fast.img"}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vdb", Bus: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: "ua-fast"},
		}, {
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2", ErrorPolicy: "stop"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: DefaultEphemeralDiskDir + "/disk-data/iso/disk.qcow2"}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "scsi", Tray: "open"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
			Alias:    &libvirtxml.DomainAlias{Name: "ua-iso"},
		}},
	}, {
		name: "I/O threads: one shared, one dedicated, multi-queue",
		vmi: newVMI(
			withDisk(v1.Disk{Name: "a"}, pvc),
			withDisk(v1.Disk{Name: "b", DedicatedIOThread: ptr(true)}, pvc),
			withDisk(v1.Disk{Name: "c"}, pvc),
			func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Domain.CPU = &v1.CPU{Cores: 2}
				vmi.Spec.Domain.Devices.BlockMultiQueue = ptr(true)
			},
		),
		wantIOThreads: 2,
		want: func() []libvirtxml.DomainDisk {
			var out []libvirtxml.DomainDisk
			for i, name := range []string{"a", "b", "c"} {
				d := pvcDisk(name, targetName("vd", i), "virtio", "virtio-non-transitional")
				d.Source.File.File = DefaultPrivateDir + "/vmi-disks/" + name + "/disk.img"
				d.Driver.IOThread, d.Driver.Queues = ptr(uint([]int{1, 2, 1}[i])), ptr(uint(2))
				out = append(out, d)
			}
			return out
		}(),
	}, {
		name:    "a LUN on virtio",
		vmi:     newVMI(withDisk(v1.Disk{Name: "l", DiskDevice: v1.DiskDevice{LUN: &v1.LunTarget{Bus: v1.DiskBusVirtio}}}, pvc)),
		opts:    Options{Disks: map[string]DiskSource{"l": {Path: "/dev/l", Block: true}}},
		wantErr: `spec.domain.devices.disks[0].lun: not supported on bus "virtio"`,
	}, {
		name:    "a LUN on a file",
		vmi:     newVMI(withDisk(v1.Disk{Name: "l", DiskDevice: v1.DiskDevice{LUN: &v1.LunTarget{}}}, pvc)),
		wantErr: `spec.domain.devices.disks[0].lun: needs a block volume; volume "l" is a file`,
	}, {
		name:    "a CD-ROM on virtio",
		vmi:     newVMI(withDisk(v1.Disk{Name: "c", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusVirtio}}}, containerDisk)),
		wantErr: `spec.domain.devices.disks[0].cdrom: not supported on bus "virtio"`,
	}, {
		name:    "a writable CD-ROM",
		vmi:     newVMI(withDisk(v1.Disk{Name: "c", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{ReadOnly: ptr(false)}}}, containerDisk)),
		wantErr: "spec.domain.devices.disks[0].cdrom.readonly: a CD-ROM is always read-only",
	}, {
		name:    "a read-only SATA disk",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA, ReadOnly: true}}}, pvc)),
		wantErr: `spec.domain.devices.disks[0].disk.readonly: not supported on bus "sata"`,
	}, {
		name:    "cloud-init on a SATA disk",
		vmi:     newVMI(withDisk(v1.Disk{Name: "ci", DiskDevice: onBus(v1.DiskBusSATA)}, noCloud)),
		wantErr: `spec.domain.devices.disks[0].disk.bus: volume "ci" is a read-only ISO`,
	}, {
		name:    "two device types",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{}, CDRom: &v1.CDRomTarget{}}}, pvc)),
		wantErr: "spec.domain.devices.disks[0]: may set only one of disk, lun and cdrom",
	}, {
		name:    "an unknown bus",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", DiskDevice: onBus("ide")}, pvc)),
		wantErr: `spec.domain.devices.disks[0].disk.bus: unknown bus "ide"`,
	}, {
		name: "a disk without its volume",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "ghost"}}
		}),
		wantErr: `spec.domain.devices.disks[0].name: no volume named "ghost" in spec.volumes`,
	}, {
		name:    "native I/O with a host cache",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", IO: v1.IONative, Cache: v1.CacheWriteBack}, pvc)),
		wantErr: `spec.domain.devices.disks[0].io: native I/O needs cache mode none, not "writeback"`,
	}, {
		name:    "a shareable disk with a host cache",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", Shareable: ptr(true), Cache: v1.CacheWriteThrough}, pvc)),
		wantErr: `spec.domain.devices.disks[0].shareable: a shareable disk needs cache mode none`,
	}, {
		name:    "a dedicated I/O thread on SATA",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", DedicatedIOThread: ptr(true), DiskDevice: onBus(v1.DiskBusSATA)}, pvc)),
		wantErr: `spec.domain.devices.disks[0].dedicatedIOThread: only virtio disks have I/O threads`,
	}, {
		name:    "a serial libvirt would reject",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", Serial: "has space"}, pvc)),
		wantErr: `spec.domain.devices.disks[0].serial: "has space" must be 1 to 36`,
	}, {
		name:    "a name that escapes the disk directory",
		vmi:     newVMI(withDisk(v1.Disk{Name: ".."}, pvc)),
		wantErr: `spec.domain.devices.disks[0].name: ".." must be`,
	}, {
		name: "duplicate boot orders",
		vmi: newVMI(
			withDisk(v1.Disk{Name: "a", BootOrder: ptr(uint(1))}, pvc),
			withDisk(v1.Disk{Name: "b", BootOrder: ptr(uint(1))}, pvc),
		),
		wantErr: "spec.domain.devices.disks[1].bootOrder: boot order 1 is already used by spec.domain.devices.disks[0].bootOrder",
	}, {
		name: "a hostDisk where the pod mounts its directory, under PrivateDir",
		vmi:  newVMI(withDisk(v1.Disk{Name: "h"}, v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/var/lib/images/data.img", Type: v1.HostDiskExistsOrCreateEmpty}})),
		opts: Options{PrivateDir: "/p"},
		want: []libvirtxml.DomainDisk{{
			Device: "disk", Model: "virtio-non-transitional",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", ErrorPolicy: "stop", Discard: "unmap"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/p/vmi-disks/h/data.img"}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: "ua-h"},
		}},
	}, {
		name:    "a hostDisk path without a file name",
		vmi:     newVMI(withDisk(v1.Disk{Name: "h"}, v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data/.."}})),
		wantErr: `spec.volumes[0].hostDisk.path: "/data/.." does not end in a file name`,
	}, {
		name:    "a relative hostDisk path",
		vmi:     newVMI(withDisk(v1.Disk{Name: "h"}, v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "data.img"}})),
		wantErr: `spec.volumes[0].hostDisk.path: "data.img" is not an absolute path`,
	}, {
		name:    "sysprep",
		vmi:     newVMI(withDisk(v1.Disk{Name: "s"}, v1.VolumeSource{Sysprep: &v1.SysprepSource{}})),
		wantErr: "spec.volumes[0].sysprep: not supported",
	}, {
		name:    "an unknown image format in Options",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d"}, pvc)),
		opts:    Options{Disks: map[string]DiskSource{"d": {Path: "/d.vmdk", Format: "vmdk"}}},
		wantErr: `Options.Disks["d"].Format: unknown image format "vmdk"`,
	}, {
		name:    "a PCI address on SATA",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA, PciAddress: "0000:00:05.0"}}}, pvc)),
		wantErr: `spec.domain.devices.disks[0].disk.pciAddress: only virtio disks sit on PCI`,
	}, {
		name:    "a malformed PCI address",
		vmi:     newVMI(withDisk(v1.Disk{Name: "d", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{PciAddress: "00:05.0"}}}, pvc)),
		wantErr: `spec.domain.devices.disks[0].disk.pciAddress: "00:05.0" is not a PCI address`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, (*converter).convertCPU, (*converter).convertDisks)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, dom.Devices.Disks); diff != "" {
				t.Errorf("<disk>s (-want +got):\n%s", diff)
			}
			if dom.IOThreads != tc.wantIOThreads {
				t.Errorf("<iothreads> %d, want %d", dom.IOThreads, tc.wantIOThreads)
			}
		})
	}
}

// pvcDisk is a filesystem PVC disk under PrivateDir /p.
func pvcDisk(name, target, bus, model string) libvirtxml.DomainDisk {
	return libvirtxml.DomainDisk{
		Device: "disk", Model: model,
		Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", ErrorPolicy: "stop", Discard: "unmap"},
		Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/p/vmi-disks/" + name + "/disk.img"}},
		Target: &libvirtxml.DomainDiskTarget{Dev: target, Bus: bus},
		Alias:  &libvirtxml.DomainAlias{Name: "ua-" + name},
	}
}

func TestTargetName(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		n      int
		want   string
	}{{"vd", 0, "vda"}, {"vd", 25, "vdz"}, {"vd", 26, "vdaa"}, {"sd", 27, "sdab"}, {"sd", 701, "sdzz"}, {"sd", 702, "sdaaa"}, {"hd", 1, "hdb"}} {
		if got := targetName(tc.prefix, tc.n); got != tc.want {
			t.Errorf("targetName(%q, %d) = %q, want %q", tc.prefix, tc.n, got, tc.want)
		}
	}
}
