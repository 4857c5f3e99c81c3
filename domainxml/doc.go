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
// Marshal is libvirtxml's (*Domain).Marshal: encoding/xml, indented by
// two spaces. A domain is converted and defined once per VM start, which
// takes seconds, so the package favours plain code over speed: converters
// build the domain from ordinary composite literals, the UUID comes from
// github.com/google/uuid and the metadata element from encoding/xml, and a
// conversion plus Marshal costs tens of microseconds. What is still written
// by hand are checks with no library equivalent: names are matched byte by
// byte against the characters libvirt and QEMU accept, and a firmware UUID
// must be in the canonical 8-4-4-4-12 form, which uuid.Parse would not
// insist on. testdata/ holds golden VMIs and their domain XML, regenerated
// with go test ./domainxml -update and checked against libvirt's schema.
package domainxml
