package podtemplate

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Multus annotations, and how KubeVirt names the pod interface of a
// secondary network: "pod" and the first 11 hex digits of the SHA-256 of the
// network's name (11 so that "-nic" still fits Linux's 15 characters).
const (
	multusNetworksAnnotation       = "k8s.v1.cni.cncf.io/networks"
	multusDefaultNetworkAnnotation = "v1.multus-cni.io/default-network"
	podInterfacePrefix             = "pod"
	podInterfaceHashLen            = 11
)

// networkAnnotations returns the Multus annotations that attach the VMI's
// Multus networks to the pod: every secondary network, as a
// NetworkAttachmentDefinition in the VMI's namespace unless it names one as
// <namespace>/<name>, with its KubeVirt pod interface name and the guest
// interface's MAC address; and the network marked default, which replaces
// the pod network. Both are empty when the VMI uses none.
func networkAnnotations(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, namespace string) (networks, defaultNetwork string, err error) {
	var buf []byte // the JSON list of Multus network selection elements
	for i := range spec.Networks {
		n := &spec.Networks[i]
		if n.Multus == nil {
			continue
		}
		field := "spec.networks[" + strconv.Itoa(i) + "].multus"
		nadNS, nadName := namespace, n.Multus.NetworkName
		if before, after, found := strings.Cut(nadName, "/"); found {
			nadNS, nadName = before, after
		}
		if !isDNSLabel(nadNS) || !isDNSSubdomain(nadName) {
			return "", "", f.ref.errorf(field+".networkName", "%q is not <name> or <namespace>/<name> of a NetworkAttachmentDefinition", n.Multus.NetworkName)
		}
		if n.Multus.Default {
			if defaultNetwork != "" {
				return "", "", f.ref.errorf(field+".default", "a second default network; the pod has one")
			}
			defaultNetwork = n.Multus.NetworkName
			continue
		}
		mac := ""
		for j := range spec.Domain.Devices.Interfaces {
			if iface := &spec.Domain.Devices.Interfaces[j]; iface.Name == n.Name {
				mac = iface.MacAddress
			}
		}
		if buf == nil {
			buf = append(make([]byte, 0, 128), '[')
		} else {
			buf = append(buf, ',')
		}
		buf = appendJSONField(append(buf, '{'), "name", nadName)
		buf = appendJSONField(append(buf, ','), "namespace", nadNS)
		if mac != "" {
			buf = appendJSONField(append(buf, ','), "mac", mac)
		}
		buf = appendJSONField(append(buf, ','), "interface", podInterfaceName(n.Name))
		buf = append(buf, '}')
	}
	if buf == nil {
		return "", defaultNetwork, nil
	}
	return string(append(buf, ']')), defaultNetwork, nil
}

// appendJSONField appends "key":"value" to buf; key needs no escaping.
func appendJSONField(buf []byte, key, value string) []byte {
	buf = append(append(append(buf, '"'), key...), `":"`...)
	for i := 0; i < len(value); {
		c := value[i]
		switch {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
		case c < 0x20:
			buf = append(buf, `\u00`...)
			buf = append(buf, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		case c < utf8.RuneSelf:
			buf = append(buf, c)
		default:
			r, size := utf8.DecodeRuneInString(value[i:])
			if r == utf8.RuneError && size == 1 {
				buf = append(buf, `\ufffd`...)
			} else {
				buf = append(buf, value[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(buf, '"')
}

// podInterfaceName is the pod's interface for a secondary network.
func podInterfaceName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return podInterfacePrefix + hex.EncodeToString(sum[:])[:podInterfaceHashLen]
}
