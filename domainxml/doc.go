// Package domainxml turns a VirtualMachineInstance into the libvirt domain
// that runs it: [Convert] builds a libvirtxml.Domain, [Marshal] writes its
// XML for virDomainDefineXML. It is pure Go (no cgo, no libvirt client
// library), so controllers and tools can render domains without libvirt.
//
// The VMI says what the guest should look like; [Options] carries what only
// the node knows: whether KVM works (otherwise QEMU's TCG emulator runs the
// guest), where the launcher put each disk image, cloud-init ISO, kernel and
// socket, which EFI firmware is installed, which host CPUs a dedicated guest
// may use. Its zero value matches KubeVirt's launcher layout with KVM.
//
// Convert is a sequence of small converters, one per part of the domain,
// each with its own table test: identity (name <namespace>_<name>, a UUID
// derived from the VMI's UID unless spec.domain.firmware.uuid is set,
// [Metadata] naming the VMI), firmware (BIOS, EFI, direct kernel boot,
// SMBIOS), CPU (topology, model, pinning), memory (huge pages), features,
// clock, disks, interfaces, console, the guest agent channel, graphics,
// inputs, watchdog, RNG, balloon and controllers. Whatever the spec asks for
// that the domain cannot
// express is an error naming the field, for example
//
//	spec.domain.devices.disks[1].lun: not supported on bus "virtio"
//
// so a bad VMI fails before libvirt sees it, with a message a user can act
// on.
//
// Marshal writes the same bytes as libvirtxml's (*Domain).Marshal, about
// ten times faster, because conversion sits on the path of every VMI start;
// domains carrying fields Convert never sets fall back to libvirtxml's
// encoder. testdata/ holds golden VMIs and their domain XML, regenerated with
// go test ./domainxml -update and checked against libvirt's schema.
package domainxml
