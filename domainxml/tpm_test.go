package domainxml

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertTPM(t *testing.T) {
	on, off := true, false
	emulator := func(model, persistent string) []libvirtxml.DomainTPM {
		return []libvirtxml.DomainTPM{{
			Model:   model,
			Backend: &libvirtxml.DomainTPMBackend{Emulator: &libvirtxml.DomainTPMBackendEmulator{Version: "2.0", PersistentState: persistent}},
		}}
	}
	for _, tc := range []struct {
		name    string
		tpm     *v1.TPMDevice
		arch    string
		want    []libvirtxml.DomainTPM
		wantErr string
	}{
		{name: "no tpm", tpm: nil},
		{name: "tpm: {} is KubeVirt's tpm-tis on swtpm", tpm: &v1.TPMDevice{}, want: emulator("tpm-tis", "")},
		{name: "enabled", tpm: &v1.TPMDevice{Enabled: &on}, want: emulator("tpm-tis", "")},
		{name: "persistent false", tpm: &v1.TPMDevice{Persistent: &off}, want: emulator("tpm-tis", "")},
		{name: "disabled", tpm: &v1.TPMDevice{Enabled: &off}},
		{name: "disabled wins over persistent", tpm: &v1.TPMDevice{Enabled: &off, Persistent: &on}},
		{name: "persistent is tpm-crb with persistent state", tpm: &v1.TPMDevice{Persistent: &on}, want: emulator("tpm-crb", "yes")},
		{name: "arm64: tpm-tis", tpm: &v1.TPMDevice{}, arch: "arm64", want: emulator("tpm-tis", "")},
		{name: "arm64 has no tpm-crb", tpm: &v1.TPMDevice{Persistent: &on}, arch: "arm64",
			wantErr: "spec.domain.devices.tpm.persistent: a persistent TPM is a tpm-crb device, which arm64 guests do not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := newVMI(func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Domain.Devices.TPM = tc.tpm
				vmi.Spec.Architecture = tc.arch
			})
			dom, err := runSteps(t, vmi, Options{}, (*converter).convertTPM)
			checkErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, dom.Devices.TPMs); diff != "" {
				t.Errorf("TPMs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConvertTPMXML: the whole conversion writes libvirt's emulator
// backend element, which libvirt turns into a swtpm process.
func TestConvertTPMXML(t *testing.T) {
	dom, err := Convert(newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Devices.TPM = &v1.TPMDevice{} }), Options{Emulation: true})
	if err != nil {
		t.Fatal(err)
	}
	xml, err := Marshal(dom)
	if err != nil {
		t.Fatal(err)
	}
	const want = `<tpm model="tpm-tis">
      <backend type="emulator" version="2.0"></backend>
    </tpm>`
	if !strings.Contains(xml, want) {
		t.Errorf("domain XML lacks\n%s\ngot:\n%s", want, xml)
	}
}
