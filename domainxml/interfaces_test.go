package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// withNIC adds an interface and the network backing it.
func withNIC(iface v1.Interface, src v1.NetworkSource) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, iface)
		vmi.Spec.Networks = append(vmi.Spec.Networks, v1.Network{Name: iface.Name, NetworkSource: src})
	}
}

var (
	podNet         = v1.NetworkSource{Pod: &v1.PodNetwork{}}
	multusNet      = v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "other"}}
	masquerade     = v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
	bridge         = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	ethernet       = &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}}
	virtioNonTrans = &libvirtxml.DomainInterfaceModel{Type: "virtio-non-transitional"}
	noROM          = &libvirtxml.DomainROM{Enabled: "no"}
	tap            = func(dev string) *libvirtxml.DomainInterfaceTarget {
		return &libvirtxml.DomainInterfaceTarget{Dev: dev, Managed: "no"}
	}
	alias   = func(name string) *libvirtxml.DomainAlias { return &libvirtxml.DomainAlias{Name: "ua-" + name} }
	pciAddr = func(d, b, s, f uint) *libvirtxml.DomainAddress {
		return &libvirtxml.DomainAddress{PCI: &libvirtxml.DomainAddressPCI{Domain: &d, Bus: &b, Slot: &s, Function: &f}}
	}
)

func TestConvertInterfaces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		opts    Options
		want    []libvirtxml.DomainInterface
		wantErr string
	}{{
		name: "acpiIndex and link state down (KubeVirt's state: down)",
		vmi:  newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: masquerade, ACPIIndex: 3, State: v1.InterfaceStateLinkDown}, podNet)),
		want: []libvirtxml.DomainInterface{{Source: ethernet, Target: tap("tap0"), Model: virtioNonTrans, ROM: noROM, Alias: alias("default"),
			ACPI: &libvirtxml.DomainDeviceACPI{Index: 3}, Link: &libvirtxml.DomainInterfaceLink{State: "down"}}},
	}, {
		name: "state up is the default link",
		vmi:  newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: masquerade, State: v1.InterfaceStateLinkUp}, podNet)),
		want: []libvirtxml.DomainInterface{{Source: ethernet, Target: tap("tap0"), Model: virtioNonTrans, ROM: noROM, Alias: alias("default")}},
	}, {
		name: "an acpiIndex twice",
		vmi: newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: bridge, ACPIIndex: 1}, podNet),
			withNIC(v1.Interface{Name: "b", InterfaceBindingMethod: bridge, ACPIIndex: 1}, multusNet)),
		wantErr: `spec.domain.devices.interfaces[1].acpiIndex: 1 is also interface "default"'s`,
	}, {
		name:    "an acpiIndex beyond QEMU's",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: bridge, ACPIIndex: 16384}, podNet)),
		wantErr: "spec.domain.devices.interfaces[0].acpiIndex: 16384 is not between 1 and 16383 (QEMU's acpi-index)",
	}, {
		name: "masquerade on the pod network: tap0, virtio, no option ROM",
		vmi:  newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: masquerade}, podNet)),
		want: []libvirtxml.DomainInterface{{Source: ethernet, Target: tap("tap0"), Model: virtioNonTrans, ROM: noROM, Alias: alias("default")}},
	}, {
		name: "bridge on Multus networks: tap<N> in network order, MAC, model, boot order, PCI address",
		vmi: newVMI(
			withNIC(v1.Interface{Name: "b", InterfaceBindingMethod: bridge, Model: "e1000e", MacAddress: "02-00-00-AB-CD-EF", BootOrder: ptr(uint(2))}, multusNet),
			withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: bridge}, podNet),
			withNIC(v1.Interface{Name: "c", PciAddress: "0000:01:1f.7"}, multusNet),
		),
		want: []libvirtxml.DomainInterface{{
			Source: ethernet, Target: tap("tap1"), Model: &libvirtxml.DomainInterfaceModel{Type: "e1000e"},
			MAC: &libvirtxml.DomainInterfaceMAC{Address: "02:00:00:ab:cd:ef"}, Boot: &libvirtxml.DomainDeviceBoot{Order: 2}, Alias: alias("b"),
		}, {
			Source: ethernet, Target: tap("tap0"), Model: virtioNonTrans, ROM: noROM, Alias: alias("default"),
		}, {
			Source: ethernet, Target: tap("tap2"), Model: virtioNonTrans, ROM: noROM, Alias: alias("c"), Address: pciAddr(0, 1, 0x1f, 7),
		}},
	}, {
		name: "tap devices from Options, multi-queue",
		vmi: newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: masquerade}, podNet), func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Cores: 4}
			vmi.Spec.Domain.Devices.NetworkInterfaceMultiQueue = ptr(true)
		}),
		opts: Options{TapDevices: map[string]string{"default": "tap-vm"}},
		want: []libvirtxml.DomainInterface{{
			Source: ethernet, Target: tap("tap-vm"), Model: virtioNonTrans, ROM: noROM, Alias: alias("default"),
			Driver: &libvirtxml.DomainInterfaceDriver{Queues: 4},
		}},
	}, {
		name:    "masquerade on a Multus network",
		vmi:     newVMI(withNIC(v1.Interface{Name: "m", InterfaceBindingMethod: masquerade}, multusNet)),
		wantErr: "spec.domain.devices.interfaces[0].masquerade: only supported on the pod network",
	}, {
		name:    "SR-IOV",
		vmi:     newVMI(withNIC(v1.Interface{Name: "s", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}, multusNet)),
		wantErr: "spec.domain.devices.interfaces[0].sriov: binding not supported",
	}, {
		name:    "two bindings",
		vmi:     newVMI(withNIC(v1.Interface{Name: "x", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}, Masquerade: &v1.InterfaceMasquerade{}}}, podNet)),
		wantErr: "spec.domain.devices.interfaces[0]: may set only one binding",
	}, {
		name:    "a bad MAC",
		vmi:     newVMI(withNIC(v1.Interface{Name: "x", MacAddress: "02:00:00:00:00"}, podNet)),
		wantErr: `spec.domain.devices.interfaces[0].macAddress: "02:00:00:00:00" is not a 48-bit MAC address`,
	}, {
		name:    "a multicast MAC",
		vmi:     newVMI(withNIC(v1.Interface{Name: "x", MacAddress: "01:00:5e:00:00:01"}, podNet)),
		wantErr: `spec.domain.devices.interfaces[0].macAddress: "01:00:5e:00:00:01" is a multicast address`,
	}, {
		name:    "an unknown model",
		vmi:     newVMI(withNIC(v1.Interface{Name: "x", Model: "vmxnet3"}, podNet)),
		wantErr: `spec.domain.devices.interfaces[0].model: unknown model "vmxnet3"`,
	}, {
		name: "an interface without its network",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "ghost"}}
		}),
		wantErr: `spec.domain.devices.interfaces[0].name: no network named "ghost" in spec.networks`,
	}, {
		name:    "two pod networks",
		vmi:     newVMI(withNIC(v1.Interface{Name: "a"}, podNet), withNIC(v1.Interface{Name: "b"}, podNet)),
		wantErr: "spec.networks[1].pod: only one network may be the pod network",
	}, {
		name: "a boot order a disk already has",
		vmi: newVMI(withDisk(v1.Disk{Name: "d", BootOrder: ptr(uint(1))}, pvc),
			withNIC(v1.Interface{Name: "n", BootOrder: ptr(uint(1))}, podNet)),
		wantErr: "spec.domain.devices.interfaces[0].bootOrder: boot order 1 is already used by spec.domain.devices.disks[0].bootOrder",
	}, {
		name:    "a bad tap name in Options",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default"}, podNet)),
		opts:    Options{TapDevices: map[string]string{"default": "a-very-long-tap-device"}},
		wantErr: `Options.TapDevices["default"]: "a-very-long-tap-device" is not a network device name`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, (*converter).convertCPU, (*converter).convertDisks, (*converter).convertInterfaces)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, dom.Devices.Interfaces); diff != "" {
				t.Errorf("<interface>s (-want +got):\n%s", diff)
			}
		})
	}
}
