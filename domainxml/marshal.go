package domainxml

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirtxml"
)

// Marshal returns dom as libvirt domain XML for virDomainDefineXML:
// libvirtxml's (*Domain).Marshal, indented by two spaces, with the error
// naming the domain. It marshals any domain, including one a caller
// extended with fields Convert never sets.
func Marshal(dom *libvirtxml.Domain) (string, error) {
	if dom == nil {
		return "", errors.New("domainxml: nil domain")
	}
	out, err := dom.Marshal()
	if err != nil {
		return "", fmt.Errorf("domainxml: marshal domain %q: %w", dom.Name, err)
	}
	return out, nil
}
