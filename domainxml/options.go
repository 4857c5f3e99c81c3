package domainxml

import (
	"path/filepath"

	"github.com/vmkit/vmkit/internal/netnames"
)

// Default locations, matching the layout KubeVirt's launcher pod uses so
// that a launcher image built for one works for the other.
const (
	// DefaultEphemeralDiskDir holds container-disk overlays, empty disks and
	// cloud-init ISOs: everything that lives only as long as the launcher.
	DefaultEphemeralDiskDir = "/var/run/kubevirt-ephemeral-disks"
	// DefaultPrivateDir holds PVC mount points, config disks and, in a
	// subdirectory named after the VMI's UID, the console and VNC sockets.
	DefaultPrivateDir = "/var/run/kubevirt-private"
	// DefaultNVRAMDir holds the EFI variable store of each guest.
	DefaultNVRAMDir = "/var/lib/libvirt/qemu/nvram"

	// DefaultOVMFCode and DefaultOVMFVars are Debian's and Ubuntu's OVMF
	// firmware and variable template without secure boot (package ovmf).
	DefaultOVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	DefaultOVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	// DefaultOVMFSecureCode and DefaultOVMFSecureVars are the secure-boot
	// firmware and a variable template with Microsoft's keys enrolled.
	DefaultOVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	DefaultOVMFSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	// DefaultAAVMFCode and DefaultAAVMFVars are the arm64 EFI firmware and
	// variable template (package qemu-efi-aarch64).
	DefaultAAVMFCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	DefaultAAVMFVars = "/usr/share/AAVMF/AAVMF_VARS.fd"

	// DefaultSMBIOSManufacturer, DefaultSMBIOSProduct and
	// DefaultSMBIOSFamily are what KubeVirt reports, so guest tooling that
	// detects KubeVirt through DMI keeps working.
	DefaultSMBIOSManufacturer = "KubeVirt"
	DefaultSMBIOSProduct      = "None"
	DefaultSMBIOSFamily       = "KubeVirt"
)

// Options carries what the node knows and the VMI does not: whether KVM
// works, where the launcher put the guest's disks and sockets, which firmware
// is installed. The zero value is valid: KVM, amd64, q35 and KubeVirt's
// launcher paths.
type Options struct {
	// Emulation runs the guest under QEMU's TCG emulator (domain type
	// "qemu") instead of KVM (domain type "kvm"). Set it on nodes without a
	// usable /dev/kvm, as KubeVirt's useEmulation does. Under emulation the
	// host-model and host-passthrough CPU modes become mode "maximum": every
	// feature TCG can emulate.
	Emulation bool

	// Architecture is the guest architecture when spec.architecture is
	// unset: "amd64" (the default) or "arm64".
	Architecture string

	// MachineType is the machine type when spec.domain.machine.type is
	// unset; "q35" on amd64 and "virt" on arm64 when empty.
	MachineType string

	// CPUModel is the CPU model when spec.domain.cpu.model is unset, like
	// KubeVirt's cluster-wide cpuModel: "host-model", "host-passthrough" or
	// a libvirt model name such as "Skylake-Client". When empty, KVM guests
	// get host-model (host-passthrough on arm64) and emulated guests
	// "maximum".
	CPUModel string

	// EphemeralDiskDir is where the launcher keeps the copy-on-write
	// overlays of container disks (<dir>/disk-data/<volume>/disk.qcow2),
	// empty disks (<dir>/empty-disks/<volume>.qcow2), ephemeral PVC overlays
	// and cloud-init ISOs. DefaultEphemeralDiskDir when empty.
	EphemeralDiskDir string

	// PrivateDir is where the launcher pod mounts filesystem PVCs
	// (<dir>/vmi-disks/<volume>/disk.img) and the node directories of host
	// disks (<dir>/vmi-disks/<volume>/<base name of hostDisk.path>), where
	// the launcher writes config-map, secret, downward-API and
	// service-account ISOs, and, under <dir>/<VMI UID>/, the serial console
	// and VNC sockets. DefaultPrivateDir when empty.
	PrivateDir string

	// Disks overrides, per volume name, where the launcher put a volume's
	// disk image or block device. A volume not listed here is found at its
	// default path (see EphemeralDiskDir and PrivateDir).
	Disks map[string]DiskSource

	// CloudInitISOs overrides, per volume name, the path of the ISO the
	// launcher generated for a cloudInitNoCloud or cloudInitConfigDrive
	// volume. Default: <EphemeralDiskDir>/cloud-init-data/<namespace>/<name>/
	// noCloud.iso or configdrive.iso.
	CloudInitISOs map[string]string

	// KernelPath and InitrdPath are where the launcher extracted the kernel
	// and initrd of spec.domain.firmware.kernelBoot.container. Default:
	// <EphemeralDiskDir>/kernel-boot/<base name of kernelPath or initrdPath>.
	KernelPath string
	InitrdPath string

	// SerialSocket is the UNIX socket QEMU listens on for the serial
	// console; <PrivateDir>/<VMI UID>/virt-serial0 when empty. Ignored when
	// SerialPTY is set.
	SerialSocket string
	// SerialPTY connects the serial console to a pseudo-terminal instead of
	// a UNIX socket.
	SerialPTY bool
	// SerialLog is the file virtlogd copies all console output to;
	// <SerialSocket>-log (or <PrivateDir>/<VMI UID>/virt-serial0-log with
	// SerialPTY) when empty.
	SerialLog string

	// VNCSocket is the UNIX socket QEMU's VNC server listens on;
	// <PrivateDir>/<VMI UID>/virt-vnc when empty.
	VNCSocket string

	// Firmware names the EFI firmware files; see EFIFirmware for defaults.
	Firmware EFIFirmware

	// CPUSet lists the host CPUs the launcher's cgroup may use. With
	// spec.domain.cpu.dedicatedCpuPlacement, vCPU i is pinned to CPUSet[i]
	// and, with isolateEmulatorThread, the emulator to the CPU after the
	// last vCPU's. Required then; ignored otherwise.
	CPUSet []uint

	// HostNUMANodes maps host CPUs to their NUMA node, for
	// spec.domain.cpu.numa.guestMappingPassthrough; a CPU it does not
	// list (all of them when nil) is on node 0.
	HostNUMANodes map[uint]uint

	// TapDevices overrides, per interface name, the tap device the launcher
	// created for it. Default: "tap0" for the interface on the pod network,
	// "tap<N>" for the interface on the N-th Multus network (N from 1, in
	// spec.networks order), the names the node agent wires them with
	// (internal/netnames).
	TapDevices map[string]string

	// SMBIOS is what the guest reads from its DMI system table; the
	// Default* SMBIOS constants when a field is empty.
	SMBIOS SMBIOS

	// PasstSocket is the UNIX socket of the passt process that serves the
	// interface with the passtBinding (the launcher starts passt on it
	// before the domain); <PrivateDir>/<VMI UID>/passt.sock when empty.
	PasstSocket string
}

// DiskSource is a disk image file or block device the launcher prepared for
// one volume.
type DiskSource struct {
	// Path of the image file or block device; absolute.
	Path string
	// Block says Path is a block device, not a file.
	Block bool
	// Format is the image format, "raw" or "qcow2"; when empty, qcow2 for
	// container disks, empty disks and ephemeral overlays and raw otherwise.
	Format string
}

// EFIFirmware names the firmware files of EFI guests.
type EFIFirmware struct {
	// Code and Vars are the firmware and NVRAM template without secure
	// boot; DefaultOVMFCode and DefaultOVMFVars (AAVMF on arm64) when empty.
	Code string
	Vars string
	// SecureCode and SecureVars are the secure-boot firmware and its NVRAM
	// template with keys enrolled; DefaultOVMFSecureCode and
	// DefaultOVMFSecureVars when empty.
	SecureCode string
	SecureVars string
	// NVRAMDir holds each guest's variable store, <namespace>_<name>_VARS.fd;
	// DefaultNVRAMDir when empty. Point it at a persistent volume for
	// spec.domain.firmware.bootloader.efi.persistent.
	NVRAMDir string
}

// SMBIOS is the guest's DMI system information.
type SMBIOS struct {
	Manufacturer string
	Product      string
	Family       string
	Version      string
	SKU          string
}

// resolved is Options with every default filled in and the per-VMI paths
// computed, so converters never look at empty fields.
type resolved struct {
	Options
	arch archInfo
}

// resolve fills in opts' defaults for a VMI of architecture vmiArch and
// UID uid.
func resolve(opts *Options, vmiArch string, uid string) (resolved, error) {
	r := resolved{Options: *opts}
	a := vmiArch
	field := "spec.architecture"
	if a == "" {
		a, field = r.Architecture, "Options.Architecture"
	}
	info, err := lookupArch(a)
	if err != nil {
		return r, fieldErrorf(field, "%v", err)
	}
	r.arch = info
	if r.MachineType == "" {
		r.MachineType = info.machine
	}
	if r.EphemeralDiskDir == "" {
		r.EphemeralDiskDir = DefaultEphemeralDiskDir
	}
	if r.PrivateDir == "" {
		r.PrivateDir = DefaultPrivateDir
	}
	uidDir := r.PrivateDir + "/" + uid
	defaultSocket := r.SerialSocket == "" && !r.SerialPTY
	if defaultSocket {
		r.SerialSocket = uidDir + "/virt-serial0"
	}
	if r.SerialLog == "" {
		if r.SerialPTY || defaultSocket {
			r.SerialLog = uidDir + "/virt-serial0-log"
		} else {
			r.SerialLog = r.SerialSocket + "-log"
		}
	}
	if r.VNCSocket == "" {
		r.VNCSocket = uidDir + "/virt-vnc"
	}
	if r.PasstSocket == "" {
		r.PasstSocket = uidDir + "/passt.sock"
	}
	fw := &r.Firmware
	if fw.Code == "" {
		fw.Code = info.efiCode
	}
	if fw.Vars == "" {
		fw.Vars = info.efiVars
	}
	if fw.SecureCode == "" {
		fw.SecureCode = DefaultOVMFSecureCode
	}
	if fw.SecureVars == "" {
		fw.SecureVars = DefaultOVMFSecureVars
	}
	if fw.NVRAMDir == "" {
		fw.NVRAMDir = DefaultNVRAMDir
	}
	s := &r.SMBIOS
	if s.Manufacturer == "" {
		s.Manufacturer = DefaultSMBIOSManufacturer
	}
	if s.Product == "" {
		s.Product = DefaultSMBIOSProduct
	}
	if s.Family == "" {
		s.Family = DefaultSMBIOSFamily
	}
	return r, nil
}

// kernelBootPath is where the launcher extracts a kernel-boot artifact that
// sits at p inside the container image.
func (r *resolved) kernelBootPath(p string) string {
	return r.EphemeralDiskDir + "/kernel-boot/" + filepath.Base(p)
}

// defaultTap is the launcher's tap device for the pod network (ordinal 0)
// or the ordinal-th Multus network.
func defaultTap(ordinal int) string {
	return netnames.Tap(ordinal)
}
