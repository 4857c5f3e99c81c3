package podtemplate

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/vmkit/vmkit/internal/netnames"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Multus annotations. The pod interface of a secondary network is named as
// KubeVirt names it (netnames.SecondaryInterface).
const (
	multusNetworksAnnotation       = "k8s.v1.cni.cncf.io/networks"
	multusDefaultNetworkAnnotation = "v1.multus-cni.io/default-network"
)

// networkAnnotations returns the Multus annotations that attach the VMI's
// Multus networks to the pod: every secondary network, as a
// NetworkAttachmentDefinition in the VMI's namespace unless it names one as
// <namespace>/<name>, with its KubeVirt pod interface name and the guest
// interface's MAC address; and the network marked default, which replaces
// the pod network. Both are empty when the VMI uses none.
func networkAnnotations(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, namespace string) (networks, defaultNetwork string, err error) {
	var elems []multusNetwork
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
		elems = append(elems, multusNetwork{Name: nadName, Namespace: nadNS, MAC: mac, Interface: netnames.SecondaryInterface(n.Name)})
	}
	if elems == nil {
		return "", defaultNetwork, nil
	}
	b, err := json.Marshal(elems)
	if err != nil {
		return "", "", err
	}
	return string(b), defaultNetwork, nil
}

// multusNetwork is one element of Multus' network selection annotation.
type multusNetwork struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	MAC       string `json:"mac,omitempty"`
	Interface string `json:"interface"`
}
