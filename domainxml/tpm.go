package domainxml

import (
	"libvirt.org/go/libvirtxml"
)

// convertTPM attaches the emulated TPM 2.0 spec.domain.devices.tpm asks for
// (unless enabled is false), as KubeVirt's converter does: libvirt's
// emulator backend, which runs swtpm beside QEMU, with the tpm-tis model
// (on aarch64 libvirt gives QEMU its tpm-tis-device). A persistent TPM
// (persistent: true) is tpm-crb with persistent_state='yes', so libvirt
// keeps its state when the domain is undefined; the launcher keeps that
// state on the VM's backend-storage claim.
func (c *converter) convertTPM() error {
	t := c.spec.Devices.TPM
	if t == nil || !enabled(t.Enabled, true) {
		return nil
	}
	tpm := libvirtxml.DomainTPM{
		Model:   "tpm-tis",
		Backend: &libvirtxml.DomainTPMBackend{Emulator: &libvirtxml.DomainTPMBackendEmulator{Version: "2.0"}},
	}
	if enabled(t.Persistent, false) {
		if !c.opts.arch.hasTPMCRB {
			return fieldErrorf("spec.domain.devices.tpm.persistent", "a persistent TPM is a tpm-crb device, which %s guests do not have", c.opts.arch.name)
		}
		tpm.Model = "tpm-crb"
		tpm.Backend.Emulator.PersistentState = "yes"
	}
	c.dom.Devices.TPMs = []libvirtxml.DomainTPM{tpm}
	return nil
}
