package domainxml

import (
	"fmt"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// archInfo is what differs between guest architectures.
type archInfo struct {
	// name is the Kubernetes (GOARCH) name, libvirt the libvirt/QEMU one.
	name, libvirt string
	// machine is the default machine type.
	machine string
	// efiCode and efiVars are the default EFI firmware and NVRAM template.
	efiCode, efiVars string
	// video is the model of the automatically attached video device.
	video string
	// hostCPU is the CPU mode of KVM guests that ask for none.
	hostCPU string
	// firmwareNeedsEFI: without EFI the guest can only direct-boot a kernel.
	firmwareNeedsEFI bool
	// hasI6300ESB: the i6300esb watchdog exists on this architecture.
	hasI6300ESB bool
	// hasSMM: System Management Mode exists on this architecture.
	hasSMM bool
	// hasTPMCRB: QEMU has the tpm-crb TPM interface on this architecture.
	hasTPMCRB bool
}

func lookupArch(name string) (archInfo, error) {
	switch name {
	case "", "amd64":
		return archInfo{
			name: "amd64", libvirt: "x86_64", machine: "q35",
			efiCode: DefaultOVMFCode, efiVars: DefaultOVMFVars,
			video: "vga", hostCPU: "host-model",
			hasI6300ESB: true, hasSMM: true, hasTPMCRB: true,
		}, nil
	case "arm64":
		return archInfo{
			name: "arm64", libvirt: "aarch64", machine: "virt",
			efiCode: DefaultAAVMFCode, efiVars: DefaultAAVMFVars,
			video: "virtio", hostCPU: "host-passthrough",
			firmwareNeedsEFI: true,
		}, nil
	}
	return archInfo{}, fmt.Errorf("architecture %q is not supported (supported: amd64, arm64)", name)
}

// LibvirtArch returns libvirt's name ("x86_64", "aarch64") of the guest
// architecture Convert uses for vmi: spec.architecture, else
// opts.Architecture, else amd64. Callers use it to ask libvirt's domain
// capabilities about that architecture before choosing Options.Emulation.
func LibvirtArch(vmi *v1.VirtualMachineInstance, opts *Options) (string, error) {
	a, field := vmi.Spec.Architecture, "spec.architecture"
	if a == "" {
		a, field = opts.Architecture, "Options.Architecture"
	}
	info, err := lookupArch(a)
	if err != nil {
		return "", fieldErrorf(field, "%v", err)
	}
	return info.libvirt, nil
}
