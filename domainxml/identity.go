package domainxml

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"unsafe"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// uuidNamespace is the RFC 4122 name space (cefe6045-2020-4f54-9a4f-
// c0723d5b6b1b) of domain UUIDs derived from VMI UIDs (version 5, SHA-1).
const uuidNamespace = "\xce\xfe\x60\x45\x20\x20\x4f\x54\x9a\x4f\xc0\x72\x3d\x5b\x6b\x1b"

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

	uuid, err := domainUUID(c.vmi)
	if err != nil {
		return err
	}
	c.dom.UUID = uuid

	c.a.metadata.XML = metadataXML(c.vmi)
	c.dom.Metadata = &c.a.metadata
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
	return uuidV5(uuidNamespace, string(vmi.UID)), nil
}

// uuidV5 is the RFC 4122 name-based (SHA-1) UUID of name in namespace ns.
func uuidV5(ns, name string) string {
	var in [128]byte
	u := sha1.Sum(append(append(in[:0], ns...), name...))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:16])
	return string(buf[:])
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
// grace period in the MetadataNamespace element.
func metadataXML(vmi *v1.VirtualMachineInstance) string {
	grace := v1.DefaultTerminationGracePeriodSeconds
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	b := make([]byte, 0, len(metadataOpen)+len(vmi.Namespace)+len(vmi.Name)+len(vmi.UID)+120)
	b = append(b, metadataOpen...)
	b = append(b, "<namespace>"...)
	b = appendEscaped(b, vmi.Namespace)
	b = append(b, "</namespace><name>"...)
	b = appendEscaped(b, vmi.Name)
	b = append(b, "</name><uid>"...)
	b = appendEscaped(b, string(vmi.UID))
	b = append(b, "</uid><gracePeriodSeconds>"...)
	b = strconv.AppendInt(b, grace, 10)
	b = append(b, "</gracePeriodSeconds></vmi>"...)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not used again
}

const metadataOpen = `<vmi xmlns="` + MetadataNamespace + `">`
