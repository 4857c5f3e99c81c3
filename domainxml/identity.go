package domainxml

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// uuidNamespace is the RFC 4122 name space of domain UUIDs derived from VMI
// UIDs (version 5, SHA-1).
const uuidNamespace = "cefe6045-2020-4f54-9a4f-c0723d5b6b1b"

// convertIdentity sets the domain's name (<namespace>_<name>), its UUID and
// the metadata that ties it back to the VMI.
func (c *converter) convertIdentity() error {
	m := &c.vmi.ObjectMeta
	if m.Name == "" {
		return fieldErrorf("metadata.name", "required")
	}
	if m.Namespace == "" {
		return fieldErrorf("metadata.namespace", "required")
	}
	c.dom.Name = c.vmi.DomainName()

	id, err := domainUUID(c.vmi)
	if err != nil {
		return err
	}
	c.dom.UUID = id

	meta, err := metadataXML(c.vmi)
	if err != nil {
		return err
	}
	c.dom.Metadata = &libvirtxml.DomainMetadata{XML: meta}
	return nil
}

// domainUUID is spec.domain.firmware.uuid, or else a version 5 UUID derived
// from the VMI's UID, so the guest sees the same UUID every time this VMI
// starts and a different one for every other VMI.
func domainUUID(vmi *v1.VirtualMachineInstance) (string, error) {
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		u := string(fw.UUID)
		if !isUUID(u) {
			return "", fieldErrorf("spec.domain.firmware.uuid", "%q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", u)
		}
		return strings.ToLower(u), nil
	}
	if vmi.UID == "" {
		return "", fieldErrorf("metadata.uid", "required when spec.domain.firmware.uuid is unset (the domain UUID is derived from it)")
	}
	return uuid.NewSHA1(uuid.MustParse(uuidNamespace), []byte(vmi.UID)).String(), nil
}

// isUUID reports whether s is a UUID in the canonical 8-4-4-4-12 form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// metadataXML is the domain's <metadata> content: the VMI's identity and
// grace period in a <vmi> element in MetadataNamespace.
func metadataXML(vmi *v1.VirtualMachineInstance) (string, error) {
	m := Metadata{
		Namespace:          vmi.Namespace,
		Name:               vmi.Name,
		UID:                string(vmi.UID),
		GracePeriodSeconds: v1.DefaultTerminationGracePeriodSeconds,
	}
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		m.GracePeriodSeconds = *g
	}
	var b strings.Builder
	start := xml.StartElement{Name: xml.Name{Space: MetadataNamespace, Local: "vmi"}}
	if err := xml.NewEncoder(&b).EncodeElement(m, start); err != nil {
		return "", fmt.Errorf("domainxml: marshal metadata: %w", err)
	}
	return b.String(), nil
}
