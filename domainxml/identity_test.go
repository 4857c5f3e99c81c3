package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertIdentity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vmi      *v1.VirtualMachineInstance
		wantName string
		wantUUID string
		wantErr  string
	}{{
		name:     "UUID derived from the UID (RFC 4122 version 5)",
		vmi:      newVMI(),
		wantName: "ns_vm",
		wantUUID: "3dfa27a8-fb76-5ad1-b2c2-78c1ff43f629",
	}, {
		name: "firmware.uuid wins, lower-cased",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Firmware = &v1.Firmware{UUID: "6A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"}
		}),
		wantName: "ns_vm",
		wantUUID: "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
	}, {
		name:    "firmware.uuid not a UUID",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Firmware = &v1.Firmware{UUID: "not-a-uuid"} }),
		wantErr: `spec.domain.firmware.uuid: "not-a-uuid" is not a UUID`,
	}, {
		name:    "no UID and no firmware.uuid",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.UID = "" }),
		wantErr: "metadata.uid: required",
	}, {
		name:    "no name",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Name = "" }),
		wantErr: "metadata.name: required",
	}, {
		name:    "no namespace",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Namespace = "" }),
		wantErr: "metadata.namespace: required",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, Options{}, (*converter).convertIdentity)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if dom.Name != tc.wantName || dom.UUID != tc.wantUUID {
				t.Errorf("name, UUID = %s, %s; want %s, %s", dom.Name, dom.UUID, tc.wantName, tc.wantUUID)
			}
		})
	}
}

func TestDomainUUIDStableAndDistinct(t *testing.T) {
	a1, _ := domainUUID(newVMI())
	a2, _ := domainUUID(newVMI())
	b, _ := domainUUID(newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.UID = "11111111-2222-4333-8444-555555555556" }))
	if a1 != a2 {
		t.Errorf("same UID gave %s and %s", a1, a2)
	}
	if a1 == b {
		t.Errorf("different UIDs both gave %s", a1)
	}
	if !isUUID(a1) {
		t.Errorf("%s is not a UUID", a1)
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		want Metadata
	}{{
		name: "default grace period",
		vmi:  newVMI(),
		want: Metadata{Namespace: "ns", Name: "vm", UID: "11111111-2222-4333-8444-555555555555", GracePeriodSeconds: 30},
	}, {
		name: "grace period and characters XML must escape",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Name = `a<b>&"c'`
			vmi.Spec.TerminationGracePeriodSeconds = ptr(int64(180))
		}),
		want: Metadata{Namespace: "ns", Name: `a<b>&"c'`, UID: "11111111-2222-4333-8444-555555555555", GracePeriodSeconds: 180},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, Options{}, (*converter).convertIdentity)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseMetadata(dom)
			if err != nil {
				t.Fatalf("ParseMetadata(%s): %v", dom.Metadata.XML, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Metadata{}, "XMLName")); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnmarshalMetadata(t *testing.T) {
	const ns = MetadataNamespace
	for _, tc := range []struct {
		name    string
		in      string
		wantUID string
		wantErr error
	}{
		{"domain metadata", `<vmi xmlns="` + ns + `"><uid>u1</uid></vmi>`, "u1", nil},
		{"among other applications' metadata", `<app xmlns="urn:other"><vmi><uid>wrong</uid></vmi></app><vmi xmlns="` + ns + `"><uid>u2</uid></vmi>`, "u2", nil},
		{"as virDomainGetMetadata returns it", "<vmi>\n  <uid>u3</uid>\n</vmi>", "u3", nil},
		{"someone else's vmi element", `<vmi xmlns="urn:other"><uid>u4</uid></vmi>`, "", ErrNoMetadata},
		{"nothing", "", "", ErrNoMetadata},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := UnmarshalMetadata(tc.in)
			if err != tc.wantErr || m.UID != tc.wantUID {
				t.Errorf("UnmarshalMetadata = %+v, %v; want UID %q, %v", m, err, tc.wantUID, tc.wantErr)
			}
		})
	}
	if _, err := UnmarshalMetadata(`<vmi xmlns="` + ns + `"><uid>`); err == nil || err == ErrNoMetadata {
		t.Errorf("truncated metadata: %v, want a parse error", err)
	}
	if _, err := ParseMetadata(nil); err != ErrNoMetadata {
		t.Errorf("ParseMetadata(nil) = %v, want ErrNoMetadata", err)
	}
}
