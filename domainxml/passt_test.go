package domainxml

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

var passtBinding = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}

func TestConvertPasst(t *testing.T) {
	const sock = "/var/run/kubevirt-private/11111111-2222-4333-8444-555555555555/passt.sock"
	netdev := "stream,id=passt0,server=off,addr.type=unix,addr.path=" + sock
	boot := uint(2)
	for _, tc := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		opts    Options
		wantDev string // the -device argument
		wantErr string
	}{{
		name:    "virtio, a MAC derived from the UID, no option ROM",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding}, podNet)),
		wantDev: "virtio-net-pci-non-transitional,netdev=passt0,id=passt0-nic,mac=" + passtMAC("11111111-2222-4333-8444-555555555555", "default") + ",bus=pcie.0,addr=0x1c,romfile=",
	}, {
		name: "spec MAC, boot order, acpiIndex, transitional virtio",
		vmi: newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, MacAddress: "02:AA:BB:CC:DD:EE", BootOrder: &boot, ACPIIndex: 7}, podNet),
			func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Devices.UseVirtioTransitional = ptr(true) }),
		wantDev: "virtio-net-pci-transitional,netdev=passt0,id=passt0-nic,mac=02:aa:bb:cc:dd:ee,bus=pcie.0,addr=0x1c,bootindex=2,acpi-index=7",
	}, {
		name: "e1000 on i440fx: a slot of pci.0 libvirt leaves free",
		vmi: newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, Model: "e1000", MacAddress: "02:00:00:00:00:01"}, podNet),
			func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Machine = &v1.Machine{Type: "pc"} }),
		wantDev: "e1000,netdev=passt0,id=passt0-nic,mac=02:00:00:00:00:01,bus=pci.0,addr=0x1e,romfile=",
	}, {
		name:    "off the pod network",
		vmi:     newVMI(withNIC(v1.Interface{Name: "m", InterfaceBindingMethod: passtBinding}, multusNet)),
		wantErr: "spec.domain.devices.interfaces[0].passtBinding: only supported on the pod network",
	}, {
		name:    "link down",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, State: v1.InterfaceStateLinkDown}, podNet)),
		wantErr: "spec.domain.devices.interfaces[0].state: link state down is not supported with passtBinding",
	}, {
		name:    "PCI address",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, PciAddress: "0000:00:05.0"}, podNet)),
		wantErr: "spec.domain.devices.interfaces[0].pciAddress: not supported with passtBinding",
	}, {
		name:    "unknown model",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, Model: "tulip"}, podNet)),
		wantErr: `spec.domain.devices.interfaces[0].model: unknown model "tulip"`,
	}, {
		name:    "multicast MAC",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, MacAddress: "03:00:00:00:00:01"}, podNet)),
		wantErr: `spec.domain.devices.interfaces[0].macAddress: "03:00:00:00:00:01" is not a 48-bit unicast MAC address`,
	}, {
		name:    "acpiIndex taken by a later bridge interface",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding, ACPIIndex: 4}, podNet), withNIC(v1.Interface{Name: "b", InterfaceBindingMethod: bridge, ACPIIndex: 4}, multusNet)),
		wantErr: `spec.domain.devices.interfaces[1].acpiIndex: 4 is also interface "default"'s`,
	}, {
		name:    "a socket path QEMU's option syntax would split",
		vmi:     newVMI(withNIC(v1.Interface{Name: "default", InterfaceBindingMethod: passtBinding}, podNet)),
		opts:    Options{PasstSocket: "/run/a,b.sock"},
		wantErr: `Options.PasstSocket: "/run/a,b.sock" is not an absolute path without commas`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newConverter(tc.vmi, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.convertOS(); err != nil {
				t.Fatal(err)
			}
			err = c.convertInterfaces()
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.dom.Devices.Interfaces) != 0 {
				t.Errorf("libvirt interfaces %v, want none (libvirt 9.0 cannot parse passt's)", c.dom.Devices.Interfaces)
			}
			var args []string
			for _, a := range c.dom.QEMUCommandline.Args {
				args = append(args, a.Value)
			}
			if diff := cmp.Diff([]string{"-netdev", netdev, "-device", tc.wantDev}, args); diff != "" {
				t.Errorf("QEMU arguments (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPasstMACIsStableAndLocal(t *testing.T) {
	a, b := passtMAC("u1", "default"), passtMAC("u1", "default")
	if a != b || !strings.HasPrefix(a, "52:54:00:") {
		t.Fatalf("passtMAC = %s then %s, want one stable 52:54:00 address", a, b)
	}
	if passtMAC("u2", "default") == a {
		t.Errorf("two VMIs got the same MAC %s", a)
	}
}
