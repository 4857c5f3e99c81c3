package network

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// vmiWith is a VMI with the given interfaces and networks.
func vmiWith(ifaces []v1.Interface, nets []v1.Network) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.Domain.Devices.Interfaces = ifaces
	vmi.Spec.Networks = nets
	return vmi
}

func podNet(name string) v1.Network {
	return v1.Network{Name: name, NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}
}

func multusNet(name string) v1.Network {
	return v1.Network{Name: name, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "ns/" + name}}}
}

func masq(name string) v1.Interface {
	return v1.Interface{Name: name, InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}
}

func bridged(name string) v1.Interface {
	return v1.Interface{Name: name, InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}
}

func withSpec(i v1.Interface, f func(*v1.Interface)) v1.Interface {
	f(&i)
	return i
}

func podIface(name string, index int, binding string) Interface {
	return Interface{Name: name, Index: index, Binding: binding, PodInterface: "eth0", Tap: "tap0", Bridge: "k6t-eth0"}
}

func TestPlan(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc}
	tests := []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		want []Interface
	}{{
		name: "masquerade",
		vmi:  vmiWith([]v1.Interface{masq("default")}, []v1.Network{podNet("default")}),
		want: []Interface{podIface("default", 0, BindingMasquerade)},
	}, {
		name: "bridge with MAC",
		vmi: vmiWith([]v1.Interface{withSpec(bridged("default"), func(i *v1.Interface) { i.MacAddress = "02:00:00:AA:BB:CC" })},
			[]v1.Network{podNet("default")}),
		want: []Interface{withPlanned(podIface("default", 0, BindingBridge), func(i *Interface) { i.MAC = mac })},
	}, {
		name: "DHCP options",
		vmi: vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) {
			i.DHCPOptions = &v1.DHCPOptions{BootFileName: "pxelinux.0", TFTPServerName: "tftp.example", NTPServers: []string{"10.0.0.1"},
				PrivateOptions: []v1.DHCPPrivateOptions{{Option: 240, Value: "site"}}}
		})}, []v1.Network{podNet("default")}),
		want: []Interface{withPlanned(podIface("default", 0, BindingMasquerade), func(i *Interface) {
			i.DHCP = DHCPOptions{BootFileName: "pxelinux.0", TFTPServerName: "tftp.example", NTPServers: []net.IP{net.IPv4(10, 0, 0, 1).To4()},
				PrivateOptions: []dhcp.PrivateOption{{Code: 240, Value: []byte("site")}}}
		})},
	}, {
		name: "no binding is bridge",
		vmi:  vmiWith([]v1.Interface{{Name: "default"}}, []v1.Network{podNet("default")}),
		want: []Interface{podIface("default", 0, BindingBridge)},
	}, {
		name: "masquerade ports, protocol defaults to TCP",
		vmi: vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) {
			i.Ports = []v1.Port{{Name: "http", Port: 80}, {Port: 53, Protocol: "UDP"}}
		})}, []v1.Network{podNet("default")}),
		want: []Interface{withPlanned(podIface("default", 0, BindingMasquerade), func(i *Interface) {
			i.Ports = []v1.Port{{Name: "http", Port: 80, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}
		})},
	}, {
		name: "bridge ignores ports",
		vmi: vmiWith([]v1.Interface{withSpec(bridged("default"), func(i *v1.Interface) { i.Ports = []v1.Port{{Port: 80}} })},
			[]v1.Network{podNet("default")}),
		want: []Interface{podIface("default", 0, BindingBridge)},
	}, {
		name: "Multus secondary networks: the bridge binding on KubeVirt's pod<hash>, k6t-<hash> and tap<N>",
		vmi: vmiWith([]v1.Interface{bridged("blue"), {Name: "red"}, masq("default")},
			[]v1.Network{multusNet("blue"), multusNet("red"), podNet("default")}),
		want: []Interface{
			{Name: "blue", Index: 0, Binding: BindingBridge, PodInterface: "pod16477688c0e", Tap: "tap1", Bridge: "k6t-16477688c0e", Secondary: true},
			{Name: "red", Index: 1, Binding: BindingBridge, PodInterface: "podb1f51a511f1", Tap: "tap2", Bridge: "k6t-b1f51a511f1", Secondary: true},
			podIface("default", 2, BindingMasquerade),
		},
	}, {
		name: "a Multus network marked default takes the pod network's place",
		vmi: vmiWith([]v1.Interface{bridged("blue"), bridged("red")}, []v1.Network{multusNet("blue"),
			{Name: "red", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "red", Default: true}}}}),
		want: []Interface{
			{Name: "blue", Index: 0, Binding: BindingBridge, PodInterface: "pod16477688c0e", Tap: "tap1", Bridge: "k6t-16477688c0e", Secondary: true},
			withPlanned(podIface("red", 1, BindingBridge), func(i *Interface) { i.Tap = "tap2" }),
		},
	}, {
		name: "masquerade with the default guest CIDR spelled out",
		vmi: vmiWith([]v1.Interface{masq("default")}, []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{
			Pod: &v1.PodNetwork{VMNetworkCIDR: "10.0.2.0/24"}}}}),
		want: []Interface{podIface("default", 0, BindingMasquerade)},
	}, {
		name: "networkInterfaceMultiqueue: a multi-queue tap for virtio",
		vmi: func() *v1.VirtualMachineInstance {
			vmi := vmiWith([]v1.Interface{masq("default")}, []v1.Network{podNet("default")})
			vmi.Spec.Domain.Devices.NetworkInterfaceMultiQueue = v1.BoolPtr(true)
			return vmi
		}(),
		want: []Interface{withPlanned(podIface("default", 0, BindingMasquerade), func(i *Interface) { i.MultiQueue = true })},
	}, {
		name: "networkInterfaceMultiqueue: not for e1000",
		vmi: func() *v1.VirtualMachineInstance {
			vmi := vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) { i.Model = "e1000" })}, []v1.Network{podNet("default")})
			vmi.Spec.Domain.Devices.NetworkInterfaceMultiQueue = v1.BoolPtr(true)
			return vmi
		}(),
		want: []Interface{podIface("default", 0, BindingMasquerade)},
	}, {
		name: "no interfaces",
		vmi:  vmiWith(nil, []v1.Network{podNet("default")}),
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.vmi)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

func withPlanned(i Interface, f func(*Interface)) Interface {
	f(&i)
	return i
}

func TestPlanErrors(t *testing.T) {
	pod := []v1.Network{podNet("default")}
	tests := []struct {
		name      string
		vmi       *v1.VirtualMachineInstance
		wantField string
		wantMsg   string
	}{{
		name:      "nil VMI",
		vmi:       nil,
		wantField: "vmi",
	}, {
		name:      "no network",
		vmi:       vmiWith([]v1.Interface{masq("x")}, pod),
		wantField: "spec.domain.devices.interfaces[0].name",
		wantMsg:   `no network named "x" in spec.networks`,
	}, {
		name:      "masquerade on Multus",
		vmi:       vmiWith([]v1.Interface{masq("blue")}, []v1.Network{multusNet("blue")}),
		wantField: "spec.domain.devices.interfaces[0].masquerade",
		wantMsg:   `only supported on the pod network (network "blue" is a Multus network, which takes the bridge binding)`,
	}, {
		name: "masquerade on the default Multus network",
		vmi: vmiWith([]v1.Interface{masq("blue")}, []v1.Network{
			{Name: "blue", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue", Default: true}}}}),
		wantField: "spec.domain.devices.interfaces[0].masquerade",
		wantMsg:   "only supported on the pod network",
	}, {
		name:      "passtBinding on Multus",
		vmi:       vmiWith([]v1.Interface{{Name: "blue", InterfaceBindingMethod: v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}}}, []v1.Network{multusNet("blue")}),
		wantField: "spec.domain.devices.interfaces[0].passtBinding",
		wantMsg:   "only supported on the pod network",
	}, {
		name:      "SR-IOV on Multus",
		vmi:       vmiWith([]v1.Interface{{Name: "blue", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}}, []v1.Network{multusNet("blue")}),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   "binding sriov is not supported by vmkit",
	}, {
		name: "a pod network and a default Multus network",
		vmi: vmiWith([]v1.Interface{masq("a")}, []v1.Network{podNet("a"),
			{Name: "b", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "b", Default: true}}}}),
		wantField: "spec.networks[1]",
		wantMsg:   "only one network may be the pod network",
	}, {
		name: "an NTP server that is not IPv4",
		vmi: vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) {
			i.DHCPOptions = &v1.DHCPOptions{NTPServers: []string{"10.0.0.1", "ntp.example"}}
		})}, pod),
		wantField: "spec.domain.devices.interfaces[0].dhcpOptions.ntpServers[1]",
		wantMsg:   "NTP servers must be IPv4 addresses",
	}, {
		name:      "two interfaces on the pod network",
		vmi:       vmiWith([]v1.Interface{masq("default"), bridged("default")}, pod),
		wantField: "spec.domain.devices.interfaces[1]",
		wantMsg:   `only one interface may use the pod network (spec.domain.devices.interfaces[0] "default" already does)`,
	}, {
		name:      "two pod networks",
		vmi:       vmiWith([]v1.Interface{masq("a")}, []v1.Network{podNet("a"), podNet("b")}),
		wantField: "spec.networks[1]",
	}, {
		name:      "network with neither pod nor multus",
		vmi:       vmiWith([]v1.Interface{masq("a")}, []v1.Network{{Name: "a"}}),
		wantField: "spec.networks[0]",
		wantMsg:   "must set pod or multus",
	}, {
		name: "network with both",
		vmi: vmiWith([]v1.Interface{masq("a")}, []v1.Network{{Name: "a", NetworkSource: v1.NetworkSource{
			Pod: &v1.PodNetwork{}, Multus: &v1.MultusNetwork{NetworkName: "x"}}}}),
		wantField: "spec.networks[0]",
		wantMsg:   "may set only one of pod and multus",
	}, {
		name:      "passt",
		vmi:       vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Passt: &v1.InterfacePasst{}}}}, pod),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   "binding passt plugin is not supported by vmkit; use masquerade, bridge or passtBinding",
	}, {
		name:      "slirp",
		vmi:       vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Slirp: &v1.InterfaceSlirp{}}}}, pod),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   "binding slirp is not supported by vmkit; use masquerade, bridge or passtBinding",
	}, {
		name:      "sriov",
		vmi:       vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}}, pod),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   "binding sriov is not supported by vmkit; use masquerade, bridge or passtBinding",
	}, {
		name:      "macvtap",
		vmi:       vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Macvtap: &v1.InterfaceMacvtap{}}}}, pod),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   "binding macvtap is not supported by vmkit; use masquerade, bridge or passtBinding",
	}, {
		name:      "binding plugin",
		vmi:       vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Binding: &v1.PluginBinding{Name: "netbinding"}}}}, pod),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   `binding plugin "netbinding" is not supported by vmkit; use masquerade, bridge or passtBinding`,
	}, {
		name: "masquerade with another guest CIDR",
		vmi: vmiWith([]v1.Interface{masq("default")}, []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{
			Pod: &v1.PodNetwork{VMNetworkCIDR: "10.11.12.0/24"}}}}),
		wantField: "spec.networks[0].pod.vmNetworkCIDR",
		wantMsg:   `"10.11.12.0/24": vmkit supports only the default 10.0.2.0/24`,
	}, {
		name: "masquerade with another guest IPv6 CIDR",
		vmi: vmiWith([]v1.Interface{masq("default")}, []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{
			Pod: &v1.PodNetwork{VMIPv6NetworkCIDR: "fd20::/120"}}}}),
		wantField: "spec.networks[0].pod.vmIPv6NetworkCIDR",
		wantMsg:   `"fd20::/120": vmkit supports only the default fd10:0:2::/120`,
	}, {
		name: "two bindings",
		vmi: vmiWith([]v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{
			Bridge: &v1.InterfaceBridge{}, Masquerade: &v1.InterfaceMasquerade{}}}}, pod),
		wantField: "spec.domain.devices.interfaces[0]",
		wantMsg:   "may set only one binding",
	}, {
		name:      "port 0",
		vmi:       vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) { i.Ports = []v1.Port{{Port: 0}} })}, pod),
		wantField: "spec.domain.devices.interfaces[0].ports[0].port",
		wantMsg:   "0 is not in 1..65535",
	}, {
		name:      "port too big",
		vmi:       vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) { i.Ports = []v1.Port{{Port: 80}, {Port: 65536}} })}, pod),
		wantField: "spec.domain.devices.interfaces[0].ports[1].port",
		wantMsg:   "65536 is not in 1..65535",
	}, {
		name: "bad protocol",
		vmi: vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) {
			i.Ports = []v1.Port{{Port: 80}, {Port: 132, Protocol: "SCTP"}}
		})}, pod),
		wantField: "spec.domain.devices.interfaces[0].ports[1].protocol",
		wantMsg:   `"SCTP" is not TCP or UDP`,
	}, {
		name:      "malformed MAC",
		vmi:       vmiWith([]v1.Interface{withSpec(masq("default"), func(i *v1.Interface) { i.MacAddress = "02:00:00:zz" })}, pod),
		wantField: "spec.domain.devices.interfaces[0].macAddress",
		wantMsg:   `"02:00:00:zz" is not a 48-bit MAC address`,
	}, {
		name:      "multicast MAC",
		vmi:       vmiWith([]v1.Interface{withSpec(bridged("default"), func(i *v1.Interface) { i.MacAddress = "01:00:5e:00:00:01" })}, pod),
		wantField: "spec.domain.devices.interfaces[0].macAddress",
		wantMsg:   "multicast",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.vmi)
			if err == nil {
				t.Fatalf("Plan = %+v, want an error on %s", got, tt.wantField)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Plan error %v is not a *FieldError", err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("Plan error field = %q, want %q (error: %v)", fe.Field, tt.wantField, err)
			}
			if !strings.HasPrefix(err.Error(), tt.wantField+": ") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Plan error = %q, want %q: ...%s...", err, tt.wantField, tt.wantMsg)
			}
		})
	}
}
