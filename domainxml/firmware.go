package domainxml

import (
	"path/filepath"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// convertOS sets the domain type (kvm, or qemu under emulation), the
// architecture and machine type, and the firmware: BIOS, EFI (OVMF code
// plus a per-guest NVRAM; secure boot only when spec asks for it) or a
// directly booted kernel.
func (c *converter) convertOS() error {
	c.dom.Type = "kvm"
	if c.opts.Emulation {
		c.dom.Type = "qemu"
	}

	machine := c.opts.MachineType
	if m := c.spec.Machine; m != nil && m.Type != "" {
		machine = m.Type
	}
	if !isMachineName(machine) {
		return fieldErrorf("spec.domain.machine.type", "invalid machine type %q", machine)
	}
	c.dom.OS = &libvirtxml.DomainOS{
		Type:   &libvirtxml.DomainOSType{Arch: c.opts.arch.libvirt, Machine: machine, Type: "hvm"},
		SMBios: &libvirtxml.DomainSMBios{Mode: "sysinfo"},
	}

	fw := c.spec.Firmware
	if fw == nil {
		if c.opts.arch.firmwareNeedsEFI {
			return fieldErrorf("spec.domain.firmware.bootloader", "%s guests boot only with EFI or kernelBoot", c.opts.arch.name)
		}
		return nil
	}
	if bl := fw.Bootloader; bl != nil {
		if bl.BIOS != nil && bl.EFI != nil {
			return fieldErrorf("spec.domain.firmware.bootloader", "bios and efi are mutually exclusive")
		}
		if bl.BIOS != nil {
			if c.opts.arch.firmwareNeedsEFI {
				return fieldErrorf("spec.domain.firmware.bootloader.bios", "not supported on %s", c.opts.arch.name)
			}
			if enabled(bl.BIOS.UseSerial, false) {
				c.dom.OS.BIOS = &libvirtxml.DomainBIOS{UseSerial: "yes"}
			}
		}
		if efi := bl.EFI; efi != nil {
			if err := c.convertEFI(machine, enabled(efi.SecureBoot, false)); err != nil {
				return err
			}
		}
	}
	if c.opts.arch.firmwareNeedsEFI && !c.efi && fw.KernelBoot == nil {
		return fieldErrorf("spec.domain.firmware.bootloader", "%s guests boot only with EFI or kernelBoot", c.opts.arch.name)
	}
	return c.convertKernelBoot()
}

// convertEFI boots OVMF from read-only flash with the guest's own copy of
// the variable store.
func (c *converter) convertEFI(machine string, secure bool) error {
	c.efi, c.secureBoot = true, secure
	fw := &c.opts.Firmware
	code, vars, secureAttr := fw.Code, fw.Vars, "no"
	if secure {
		if !c.opts.arch.hasSMM {
			return fieldErrorf("spec.domain.firmware.bootloader.efi.secureBoot", "not supported on %s", c.opts.arch.name)
		}
		if !isQ35(machine) {
			return fieldErrorf("spec.domain.firmware.bootloader.efi.secureBoot", "needs machine type q35, got %q", machine)
		}
		code, vars, secureAttr = fw.SecureCode, fw.SecureVars, "yes"
	}
	for _, p := range [...]struct{ field, path string }{{"Options.Firmware", code}, {"Options.Firmware", vars}, {"Options.Firmware.NVRAMDir", fw.NVRAMDir}} {
		if !isAbs(p.path) {
			return fieldErrorf(p.field, "%q is not an absolute path", p.path)
		}
	}
	c.dom.OS.Loader = &libvirtxml.DomainLoader{Path: code, Readonly: "yes", Secure: secureAttr, Type: "pflash"}
	c.dom.OS.NVRam = &libvirtxml.DomainNVRam{
		NVRam:    fw.NVRAMDir + "/" + c.vmi.DomainName() + "_VARS.fd",
		Template: vars,
	}
	return nil
}

// convertKernelBoot boots the kernel and initrd the launcher extracted from
// spec.domain.firmware.kernelBoot.container, with its kernel arguments.
func (c *converter) convertKernelBoot() error {
	kb := c.spec.Firmware.KernelBoot
	if kb == nil {
		return nil
	}
	kernel, initrd := c.opts.KernelPath, c.opts.InitrdPath
	if kernel != "" && !isAbs(kernel) {
		return fieldErrorf("Options.KernelPath", "%q is not an absolute path", kernel)
	}
	if initrd != "" && !isAbs(initrd) {
		return fieldErrorf("Options.InitrdPath", "%q is not an absolute path", initrd)
	}
	if ct := kb.Container; ct != nil {
		if ct.KernelPath == "" && ct.InitrdPath == "" {
			return fieldErrorf("spec.domain.firmware.kernelBoot.container", "needs kernelPath or initrdPath")
		}
		for _, p := range [...]struct{ field, path string }{{"kernelPath", ct.KernelPath}, {"initrdPath", ct.InitrdPath}} {
			if b := filepath.Base(p.path); p.path != "" && (b == "." || b == ".." || b == "/") {
				return fieldErrorf("spec.domain.firmware.kernelBoot.container."+p.field, "%q does not name a file", p.path)
			}
		}
		if kernel == "" && ct.KernelPath != "" {
			kernel = c.opts.kernelBootPath(ct.KernelPath)
		}
		if initrd == "" && ct.InitrdPath != "" {
			initrd = c.opts.kernelBootPath(ct.InitrdPath)
		}
	}
	if kernel == "" {
		if initrd != "" {
			return fieldErrorf("spec.domain.firmware.kernelBoot.container.kernelPath", "required with initrdPath: an initrd boots only with a kernel")
		}
		return fieldErrorf("spec.domain.firmware.kernelBoot.container", "required: kernelBoot needs a kernel to boot")
	}
	if strings.ContainsRune(kb.KernelArgs, 0) {
		return fieldErrorf("spec.domain.firmware.kernelBoot.kernelArgs", "contains a NUL byte")
	}
	c.dom.OS.Kernel, c.dom.OS.Initrd, c.dom.OS.Cmdline = kernel, initrd, kb.KernelArgs
	return nil
}

// convertSysInfo fills the SMBIOS system table the guest reads through DMI:
// the domain's UUID, spec.domain.firmware.serial and the node's vendor
// strings.
func (c *converter) convertSysInfo() error {
	s := &c.opts.SMBIOS
	e := []libvirtxml.DomainSysInfoEntry{
		{Name: "manufacturer", Value: s.Manufacturer},
		{Name: "product", Value: s.Product},
	}
	if s.Version != "" {
		e = append(e, libvirtxml.DomainSysInfoEntry{Name: "version", Value: s.Version})
	}
	if fw := c.spec.Firmware; fw != nil && fw.Serial != "" {
		e = append(e, libvirtxml.DomainSysInfoEntry{Name: "serial", Value: fw.Serial})
	}
	e = append(e, libvirtxml.DomainSysInfoEntry{Name: "uuid", Value: c.dom.UUID})
	if s.SKU != "" {
		e = append(e, libvirtxml.DomainSysInfoEntry{Name: "sku", Value: s.SKU})
	}
	e = append(e, libvirtxml.DomainSysInfoEntry{Name: "family", Value: s.Family})
	c.dom.SysInfo = []libvirtxml.DomainSysInfo{{
		SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{System: &libvirtxml.DomainSysInfoSystem{Entry: e}},
	}}
	return nil
}

// isQ35 reports whether machine is a Q35 machine type: q35 or a versioned
// pc-q35-X.Y.
func isQ35(machine string) bool {
	return machine == "q35" || strings.HasPrefix(machine, "pc-q35-")
}

// isMachineName reports whether s looks like a QEMU machine type name.
func isMachineName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(isAlnum(b) || b == '-' || b == '_' || b == '.') {
			return false
		}
	}
	return true
}

func isAlnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}
