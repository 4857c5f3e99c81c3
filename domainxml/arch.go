package domainxml

import "fmt"

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
}

func lookupArch(name string) (archInfo, error) {
	switch name {
	case "", "amd64":
		return archInfo{
			name: "amd64", libvirt: "x86_64", machine: "q35",
			efiCode: DefaultOVMFCode, efiVars: DefaultOVMFVars,
			video: "vga", hostCPU: "host-model",
			hasI6300ESB: true, hasSMM: true,
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
