package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertOS(t *testing.T) {
	efi := func(secure *bool) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{SecureBoot: secure}}}
		}
	}
	machine := func(m string) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Machine = &v1.Machine{Type: m} }
	}
	kernelBoot := func(kb *v1.KernelBoot) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: kb} }
	}
	q35 := &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"}
	smbios := &libvirtxml.DomainSMBios{Mode: "sysinfo"}
	for _, tc := range []struct {
		name     string
		vmi      *v1.VirtualMachineInstance
		opts     Options
		wantType string
		want     *libvirtxml.DomainOS
		wantErr  string
	}{{
		name:     "KVM, q35 and BIOS by default",
		vmi:      newVMI(),
		wantType: "kvm",
		want:     &libvirtxml.DomainOS{Type: q35, SMBios: smbios},
	}, {
		name:     "emulation",
		vmi:      newVMI(),
		opts:     Options{Emulation: true},
		wantType: "qemu",
		want:     &libvirtxml.DomainOS{Type: q35, SMBios: smbios},
	}, {
		name:     "spec machine type beats the node default",
		vmi:      newVMI(machine("pc-i440fx-7.2")),
		opts:     Options{MachineType: "pc-q35-7.2"},
		wantType: "kvm",
		want:     &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "pc-i440fx-7.2", Type: "hvm"}, SMBios: smbios},
	}, {
		name:    "invalid machine type",
		vmi:     newVMI(machine("q35 <x>")),
		wantErr: `spec.domain.machine.type: invalid machine type "q35 <x>"`,
	}, {
		name: "BIOS on the serial console",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{UseSerial: ptr(true)}}}
		}),
		wantType: "kvm",
		want:     &libvirtxml.DomainOS{Type: q35, SMBios: smbios, BIOS: &libvirtxml.DomainBIOS{UseSerial: "yes"}},
	}, {
		name:     "EFI without secure boot unless asked",
		vmi:      newVMI(efi(nil)),
		wantType: "kvm",
		want: &libvirtxml.DomainOS{
			Type: q35, SMBios: smbios,
			Loader: &libvirtxml.DomainLoader{Path: DefaultOVMFCode, Readonly: "yes", Secure: "no", Type: "pflash"},
			NVRam:  &libvirtxml.DomainNVRam{NVRam: DefaultNVRAMDir + "/ns_vm_VARS.fd", Template: DefaultOVMFVars},
		},
	}, {
		name:     "EFI secure boot with the node's firmware",
		vmi:      newVMI(efi(ptr(true))),
		opts:     Options{Firmware: EFIFirmware{SecureCode: "/fw/code.fd", SecureVars: "/fw/vars.fd", NVRAMDir: "/pvc/nvram"}},
		wantType: "kvm",
		want: &libvirtxml.DomainOS{
			Type: q35, SMBios: smbios,
			Loader: &libvirtxml.DomainLoader{Path: "/fw/code.fd", Readonly: "yes", Secure: "yes", Type: "pflash"},
			NVRam:  &libvirtxml.DomainNVRam{NVRam: "/pvc/nvram/ns_vm_VARS.fd", Template: "/fw/vars.fd"},
		},
	}, {
		name:    "secure boot needs q35",
		vmi:     newVMI(efi(ptr(true)), machine("pc")),
		wantErr: `spec.domain.firmware.bootloader.efi.secureBoot: needs machine type q35, got "pc"`,
	}, {
		name: "BIOS and EFI",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{}, EFI: &v1.EFI{}}}
		}),
		wantErr: "spec.domain.firmware.bootloader: bios and efi are mutually exclusive",
	}, {
		name: "kernel boot from the launcher's default paths",
		vmi: newVMI(kernelBoot(&v1.KernelBoot{KernelArgs: "console=ttyS0", Container: &v1.KernelBootContainer{
			Image: "img", KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initrd.img",
		}})),
		wantType: "kvm",
		want: &libvirtxml.DomainOS{
			Type: q35, SMBios: smbios,
			Kernel:  DefaultEphemeralDiskDir + "/kernel-boot/vmlinuz",
			Initrd:  DefaultEphemeralDiskDir + "/kernel-boot/initrd.img",
			Cmdline: "console=ttyS0",
		},
	}, {
		name: "kernel boot from paths in Options",
		vmi: newVMI(kernelBoot(&v1.KernelBoot{Container: &v1.KernelBootContainer{
			Image: "img", KernelPath: "/boot/vmlinuz",
		}})),
		opts:     Options{KernelPath: "/guest/vmlinux", InitrdPath: "/guest/initrd"},
		wantType: "kvm",
		want:     &libvirtxml.DomainOS{Type: q35, SMBios: smbios, Kernel: "/guest/vmlinux", Initrd: "/guest/initrd"},
	}, {
		name:    "kernel arguments without a kernel",
		vmi:     newVMI(kernelBoot(&v1.KernelBoot{KernelArgs: "quiet"})),
		wantErr: "spec.domain.firmware.kernelBoot.container: required",
	}, {
		name:    "an initrd without a kernel",
		vmi:     newVMI(kernelBoot(&v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "img", InitrdPath: "/initrd"}})),
		wantErr: "spec.domain.firmware.kernelBoot.container.kernelPath: required with initrdPath",
	}, {
		name:    "a kernel boot container with neither path",
		vmi:     newVMI(kernelBoot(&v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "img"}})),
		wantErr: "spec.domain.firmware.kernelBoot.container: needs kernelPath or initrdPath",
	}, {
		name:    "a kernel path that names no file",
		vmi:     newVMI(kernelBoot(&v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "img", KernelPath: "/boot/.."}})),
		wantErr: `spec.domain.firmware.kernelBoot.container.kernelPath: "/boot/.." does not name a file`,
	}, {
		name:    "a relative kernel path in Options",
		vmi:     newVMI(kernelBoot(&v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "img", KernelPath: "/k"}})),
		opts:    Options{KernelPath: "vmlinux"},
		wantErr: `Options.KernelPath: "vmlinux" is not an absolute path`,
	}, {
		name:    "a relative firmware path in Options",
		vmi:     newVMI(efi(nil)),
		opts:    Options{Firmware: EFIFirmware{Code: "OVMF_CODE.fd"}},
		wantErr: `Options.Firmware: "OVMF_CODE.fd" is not an absolute path`,
	}, {
		name:    "arm64 without EFI",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		wantErr: "spec.domain.firmware.bootloader: arm64 guests boot only with EFI or kernelBoot",
	}, {
		name:     "arm64 with EFI on the node default architecture",
		vmi:      newVMI(efi(nil)),
		opts:     Options{Architecture: "arm64"},
		wantType: "kvm",
		want: &libvirtxml.DomainOS{
			Type: &libvirtxml.DomainOSType{Arch: "aarch64", Machine: "virt", Type: "hvm"}, SMBios: smbios,
			Loader: &libvirtxml.DomainLoader{Path: DefaultAAVMFCode, Readonly: "yes", Secure: "no", Type: "pflash"},
			NVRam:  &libvirtxml.DomainNVRam{NVRam: DefaultNVRAMDir + "/ns_vm_VARS.fd", Template: DefaultAAVMFVars},
		},
	}, {
		name:    "unknown architecture",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "s390x" }),
		wantErr: `spec.architecture: architecture "s390x" is not supported`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, (*converter).convertOS)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if dom.Type != tc.wantType {
				t.Errorf("domain type %q, want %q", dom.Type, tc.wantType)
			}
			if diff := cmp.Diff(tc.want, dom.OS); diff != "" {
				t.Errorf("<os> (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertSysInfo(t *testing.T) {
	vmi := newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Firmware = &v1.Firmware{Serial: "SN-1"} })
	dom, err := runSteps(t, vmi, Options{SMBIOS: SMBIOS{Manufacturer: "Acme", Version: "2"}},
		(*converter).convertIdentity, (*converter).convertSysInfo)
	if err != nil {
		t.Fatal(err)
	}
	want := []libvirtxml.DomainSysInfo{{SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{System: &libvirtxml.DomainSysInfoSystem{
		Entry: []libvirtxml.DomainSysInfoEntry{
			{Name: "manufacturer", Value: "Acme"},
			{Name: "product", Value: DefaultSMBIOSProduct},
			{Name: "version", Value: "2"},
			{Name: "serial", Value: "SN-1"},
			{Name: "uuid", Value: dom.UUID},
			{Name: "family", Value: DefaultSMBIOSFamily},
		},
	}}}}
	if diff := cmp.Diff(want, dom.SysInfo); diff != "" {
		t.Errorf("<sysinfo> (-want +got):\n%s", diff)
	}
}
