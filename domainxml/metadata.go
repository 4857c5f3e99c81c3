package domainxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// MetadataNamespace is the XML namespace of the element Convert puts in the
// domain's <metadata>. libvirt's virDomainGetMetadata takes it as the URI to
// read the element back from a defined domain.
const MetadataNamespace = "https://github.com/vmkit/vmkit/domainxml/v1"

// Metadata ties a domain to its VMI. It survives in libvirt as long as the
// domain is defined, so the node agent can find a VMI's domain after it
// restarts without keeping state of its own.
type Metadata struct {
	XMLName xml.Name `xml:"vmi"`
	// Namespace and Name of the VMI.
	Namespace string `xml:"namespace"`
	Name      string `xml:"name"`
	// UID of the VMI.
	UID string `xml:"uid"`
	// GracePeriodSeconds is the VMI's termination grace period: how long a
	// graceful shutdown may take before the domain is destroyed.
	GracePeriodSeconds int64 `xml:"gracePeriodSeconds"`
}

// ErrNoMetadata says a domain carries no vmkit metadata: it was not created
// from a VMI.
var ErrNoMetadata = errors.New("domainxml: domain has no vmkit metadata")

// ParseMetadata reads the vmkit metadata of a domain.
func ParseMetadata(dom *libvirtxml.Domain) (Metadata, error) {
	if dom == nil || dom.Metadata == nil {
		return Metadata{}, ErrNoMetadata
	}
	return UnmarshalMetadata(dom.Metadata.XML)
}

// UnmarshalMetadata finds the vmkit metadata element in s: the content of a
// domain's <metadata> element, or the single element virDomainGetMetadata
// returns for MetadataNamespace (which libvirt returns without its
// namespace declaration, so a <vmi> root element in no namespace counts).
func UnmarshalMetadata(s string) (Metadata, error) {
	d := xml.NewDecoder(strings.NewReader(s))
	seenElement := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return Metadata{}, ErrNoMetadata
		}
		if err != nil {
			return Metadata{}, fmt.Errorf("domainxml: parse metadata: %w", err)
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		root := !seenElement
		seenElement = true
		if start.Name.Local != "vmi" || (start.Name.Space != MetadataNamespace && !(root && start.Name.Space == "")) {
			if err := d.Skip(); err != nil {
				return Metadata{}, fmt.Errorf("domainxml: parse metadata: %w", err)
			}
			continue
		}
		var m Metadata
		if err := d.DecodeElement(&m, &start); err != nil {
			return Metadata{}, fmt.Errorf("domainxml: parse metadata: %w", err)
		}
		return m, nil
	}
}
