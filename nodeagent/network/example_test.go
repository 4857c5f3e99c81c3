package network_test

import (
	"fmt"

	"github.com/vmkit/vmkit/nodeagent/network"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Plan lists the interfaces the agent wires: the one on the pod network,
// and the one on a Multus secondary network with KubeVirt's bridge binding
// on the pod interface Multus made for it. The agent then calls Setup with
// the plan on the launcher pod's namespace (/proc/<pid>/ns/net) before the
// domain starts.
func ExamplePlan() {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.Networks = []v1.Network{
		{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}},
		{Name: "storage", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "storage-net"}}},
	}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{
		{Name: "storage", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
		{
			Name:                   "default",
			InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}},
			Ports:                  []v1.Port{{Name: "http", Port: 80}},
		},
	}
	plan, err := network.Plan(vmi)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, iface := range plan {
		fmt.Printf("interfaces[%d] %s: %s, %s -> %s -> %s, ports %v\n",
			iface.Index, iface.Name, iface.Binding, iface.PodInterface, iface.Bridge, iface.Tap, iface.Ports)
	}
	fmt.Print(network.Ruleset(plan[1]))
	// Output:
	// interfaces[0] storage: bridge, pod49a25f9feef -> k6t-49a25f9feef -> tap1, ports []
	// interfaces[1] default: masquerade, eth0 -> k6t-eth0 -> tap0, ports [{http TCP 80}]
	// table ip nat {
	// 	chain prerouting {
	// 		type nat hook prerouting priority dstnat; policy accept;
	// 		iifname "eth0" jump KUBEVIRT_PREINBOUND
	// 	}
	//
	// 	chain postrouting {
	// 		type nat hook postrouting priority srcnat; policy accept;
	// 		ip saddr 10.0.2.2 masquerade
	// 		oifname "k6t-eth0" jump KUBEVIRT_POSTINBOUND
	// 	}
	//
	// 	chain output {
	// 		type nat hook output priority -100; policy accept;
	// 		ip daddr 127.0.0.1 tcp dport 80 dnat to 10.0.2.2
	// 	}
	//
	// 	chain KUBEVIRT_PREINBOUND {
	// 		tcp dport 80 dnat to 10.0.2.2
	// 	}
	//
	// 	chain KUBEVIRT_POSTINBOUND {
	// 		ip saddr 127.0.0.1 snat to 10.0.2.1
	// 	}
	// }
}

// A spec the agent cannot wire is refused with the field to fix.
func ExamplePlan_error() {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{
		{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Passt: &v1.InterfacePasst{}}},
	}
	_, err := network.Plan(vmi)
	fmt.Println(err)
	// Output:
	// spec.domain.devices.interfaces[0]: binding passt plugin is not supported by vmkit; use masquerade, bridge or passtBinding
}
