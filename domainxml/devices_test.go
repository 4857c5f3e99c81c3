package domainxml

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertGuestAgent(t *testing.T) {
	// KubeVirt's channel: libvirt picks the socket path and connects to it.
	want := []libvirtxml.DomainChannel{{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{}},
		Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: "org.qemu.guest_agent.0"}},
	}}
	dom, err := runSteps(t, newVMI(), Options{}, (*converter).convertGuestAgent)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, dom.Devices.Channels); diff != "" {
		t.Errorf("channels (-want +got):\n%s", diff)
	}
	xml, err := Marshal(dom)
	if err != nil {
		t.Fatal(err)
	}
	const wantXML = `<channel type="unix">
      <target type="virtio" name="org.qemu.guest_agent.0"></target>
    </channel>`
	if !strings.Contains(xml, wantXML) {
		t.Errorf("domain XML lacks\n%s\ngot:\n%s", wantXML, xml)
	}
}

func TestConvertConsole(t *testing.T) {
	port := func() *uint { p := uint(0); return &p }
	for _, tc := range []struct {
		name        string
		vmi         *v1.VirtualMachineInstance
		opts        Options
		wantSerials []libvirtxml.DomainSerial
		wantErr     string
	}{{
		name: "a UNIX socket under the private dir, logged",
		vmi:  newVMI(),
		wantSerials: []libvirtxml.DomainSerial{{
			Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: DefaultPrivateDir + "/11111111-2222-4333-8444-555555555555/virt-serial0"}},
			Target: &libvirtxml.DomainSerialTarget{Port: port()},
			Log:    &libvirtxml.DomainChardevLog{File: DefaultPrivateDir + "/11111111-2222-4333-8444-555555555555/virt-serial0-log", Append: "on"},
		}},
	}, {
		name: "a socket from Options, logged next to it",
		vmi:  newVMI(),
		opts: Options{SerialSocket: "/run/vm/console.sock"},
		wantSerials: []libvirtxml.DomainSerial{{
			Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: "/run/vm/console.sock"}},
			Target: &libvirtxml.DomainSerialTarget{Port: port()},
			Log:    &libvirtxml.DomainChardevLog{File: "/run/vm/console.sock-log", Append: "on"},
		}},
	}, {
		name: "a pty",
		vmi:  newVMI(),
		opts: Options{SerialPTY: true, SerialLog: "/var/log/vm.log"},
		wantSerials: []libvirtxml.DomainSerial{{
			Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
			Target: &libvirtxml.DomainSerialTarget{Port: port()},
			Log:    &libvirtxml.DomainChardevLog{File: "/var/log/vm.log", Append: "on"},
		}},
	}, {
		name: "no console",
		vmi:  newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Devices.AutoattachSerialConsole = ptr(false) }),
	}, {
		name:    "a relative socket path",
		vmi:     newVMI(),
		opts:    Options{SerialSocket: "console.sock"},
		wantErr: `Options.SerialSocket: "console.sock" is not an absolute path`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, (*converter).convertConsole)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.wantSerials, dom.Devices.Serials); diff != "" {
				t.Errorf("<serial> (-want +got):\n%s", diff)
			}
			var wantConsoles []libvirtxml.DomainConsole
			if tc.wantSerials != nil {
				wantConsoles = []libvirtxml.DomainConsole{{
					Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
					Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: port()},
				}}
			}
			if diff := cmp.Diff(wantConsoles, dom.Devices.Consoles); diff != "" {
				t.Errorf("<console> (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertGraphics(t *testing.T) {
	vnc := func(socket string) []libvirtxml.DomainGraphic {
		return []libvirtxml.DomainGraphic{{VNC: &libvirtxml.DomainGraphicVNC{Listeners: []libvirtxml.DomainGraphicListener{{
			Socket: &libvirtxml.DomainGraphicListenerSocket{Socket: socket},
		}}}}}
	}
	for _, tc := range []struct {
		name         string
		vmi          *v1.VirtualMachineInstance
		opts         Options
		wantGraphics []libvirtxml.DomainGraphic
		wantVideos   []libvirtxml.DomainVideo
	}{{
		name:         "VNC on a socket and VGA by default",
		vmi:          newVMI(),
		wantGraphics: vnc(DefaultPrivateDir + "/11111111-2222-4333-8444-555555555555/virt-vnc"),
		wantVideos:   []libvirtxml.DomainVideo{{Model: libvirtxml.DomainVideoModel{Type: "vga", Heads: 1, VRam: 16384}}},
	}, {
		name:         "virtio video on arm64",
		vmi:          newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		opts:         Options{VNCSocket: "/run/vnc"},
		wantGraphics: vnc("/run/vnc"),
		wantVideos:   []libvirtxml.DomainVideo{{Model: libvirtxml.DomainVideoModel{Type: "virtio", Heads: 1}}},
	}, {
		name: "no graphics",
		vmi:  newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Devices.AutoattachGraphicsDevice = ptr(false) }),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, (*converter).convertGraphics)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantGraphics, dom.Devices.Graphics); diff != "" {
				t.Errorf("<graphics> (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVideos, dom.Devices.Videos); diff != "" {
				t.Errorf("<video> (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConvertSmallDevices covers inputs, watchdog, RNG, balloon and the
// controllers they need.
func TestConvertSmallDevices(t *testing.T) {
	devices := func(f func(*v1.Devices)) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { f(&vmi.Spec.Domain.Devices) }
	}
	zero := func() *uint { z := uint(0); return &z }
	usbNone := libvirtxml.DomainController{Type: "usb", Index: zero(), Model: "none"}
	usbXHCI := libvirtxml.DomainController{Type: "usb", Index: zero(), Model: "qemu-xhci"}
	// Every guest that may get disks hot-plugged has a SCSI controller.
	scsi := libvirtxml.DomainController{Type: "scsi", Index: zero(), Model: "virtio-non-transitional"}
	balloon := &libvirtxml.DomainMemBalloon{Model: "virtio-non-transitional", Stats: &libvirtxml.DomainMemBalloonStats{Period: 10}}
	for _, tc := range []struct {
		name            string
		vmi             *v1.VirtualMachineInstance
		want            libvirtxml.DomainDeviceList
		wantErr         string
		wantControllers []libvirtxml.DomainController
	}{{
		name: "defaults: a balloon, no USB controller",
		vmi:  newVMI(),
		want: libvirtxml.DomainDeviceList{MemBalloon: balloon, Controllers: []libvirtxml.DomainController{usbNone, scsi}},
	}, {
		name: "an automatic tablet needs USB; no balloon",
		vmi: newVMI(devices(func(d *v1.Devices) {
			d.AutoattachInputDevice, d.AutoattachMemBalloon = ptr(true), ptr(false)
		})),
		want: libvirtxml.DomainDeviceList{
			Inputs:      []libvirtxml.DomainInput{{Type: "tablet", Bus: "usb", Alias: &libvirtxml.DomainAlias{Name: "ua-default-0"}}},
			MemBalloon:  &libvirtxml.DomainMemBalloon{Model: "none"},
			Controllers: []libvirtxml.DomainController{usbXHCI, scsi},
		},
	}, {
		name: "a virtio tablet, a watchdog, an RNG",
		vmi: newVMI(devices(func(d *v1.Devices) {
			d.Inputs = []v1.Input{{Name: "t", Type: "tablet", Bus: "virtio"}}
			d.Watchdog = &v1.Watchdog{Name: "wd", WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{}}}
			d.Rng = &v1.Rng{}
		})),
		want: libvirtxml.DomainDeviceList{
			Inputs:     []libvirtxml.DomainInput{{Type: "tablet", Bus: "virtio", Alias: &libvirtxml.DomainAlias{Name: "ua-t"}}},
			Watchdogs:  []libvirtxml.DomainWatchdog{{Model: "i6300esb", Action: "reset", Alias: &libvirtxml.DomainAlias{Name: "ua-wd"}}},
			RNGs:       []libvirtxml.DomainRNG{{Model: "virtio-non-transitional", Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}}}},
			MemBalloon: balloon, Controllers: []libvirtxml.DomainController{usbNone, scsi},
		},
	}, {
		name: "a SCSI disk brings a virtio-scsi controller",
		vmi:  newVMI(withDisk(v1.Disk{Name: "d", DiskDevice: onBus(v1.DiskBusSCSI)}, pvc)),
		want: libvirtxml.DomainDeviceList{MemBalloon: balloon, Controllers: []libvirtxml.DomainController{
			usbNone, {Type: "scsi", Index: zero(), Model: "virtio-non-transitional"},
		}},
	}, {
		name:    "a mouse",
		vmi:     newVMI(devices(func(d *v1.Devices) { d.Inputs = []v1.Input{{Name: "m", Type: "mouse"}} })),
		wantErr: `spec.domain.devices.inputs[0].type: unknown input type "mouse" (want tablet)`,
	}, {
		name:    "a PS/2 tablet",
		vmi:     newVMI(devices(func(d *v1.Devices) { d.Inputs = []v1.Input{{Name: "t", Type: "tablet", Bus: "ps2"}} })),
		wantErr: `spec.domain.devices.inputs[0].bus: unknown bus "ps2" (want usb or virtio)`,
	}, {
		name:    "a watchdog without a model",
		vmi:     newVMI(devices(func(d *v1.Devices) { d.Watchdog = &v1.Watchdog{Name: "wd"} })),
		wantErr: "spec.domain.devices.watchdog: no watchdog model set (want i6300esb)",
	}, {
		name: "an unknown watchdog action",
		vmi: newVMI(devices(func(d *v1.Devices) {
			d.Watchdog = &v1.Watchdog{Name: "wd", WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{Action: "explode"}}}
		})),
		wantErr: `spec.domain.devices.watchdog.i6300esb.action: unknown action "explode"`,
	}, {
		name: "an i6300esb on arm64",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }, devices(func(d *v1.Devices) {
			d.Watchdog = &v1.Watchdog{Name: "wd", WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{}}}
		})),
		wantErr: "spec.domain.devices.watchdog.i6300esb: not supported on arm64",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, Options{}, (*converter).convertDisks, (*converter).convertInputs,
				(*converter).convertWatchdog, (*converter).convertRNG, (*converter).convertMemBalloon, (*converter).convertControllers)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			got := *dom.Devices
			got.Disks = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("<devices> (-want +got):\n%s", diff)
			}
		})
	}
}

// A q35 guest gets empty PCIe root ports for hotplug: one per PCIe device
// it has and spare ones up to 8 in all, at least three (16 and six above
// 2 GiB); none on pc or with hotplug disabled.
func TestHotplugRootPorts(t *testing.T) {
	ports := func(vmi *v1.VirtualMachineInstance) int {
		t.Helper()
		dom, err := Convert(vmi, Options{Emulation: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range dom.Devices.Controllers {
			if c.Type == "pci" && c.Model == pcieRootPortModel {
				n++
			}
		}
		return n
	}
	q35 := ports(newVMI())
	if q35 < hotplugFreePorts+1 {
		t.Errorf("q35: %d root ports, want at least %d (the SCSI controller's and three spare)", q35, hotplugFreePorts+1)
	}
	withDisk := ports(newVMI(func(v *v1.VirtualMachineInstance) {
		v.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "d", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}
		v.Spec.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}}}}
	}))
	if withDisk != q35+1 {
		t.Errorf("a virtio disk more: %d root ports, want %d", withDisk, q35+1)
	}
	if big := ports(newVMI(func(v *v1.VirtualMachineInstance) {
		v.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("4Gi")
	})); big < q35+hotplugFreePortsLarge-hotplugFreePorts || big > hotplugTotalPortsLarge+hotplugFreePortsLarge {
		t.Errorf("4Gi guest: %d root ports, want at least %d more than a 128Mi one (%d), up to 16 in all plus 6 spare", big, hotplugFreePortsLarge-hotplugFreePorts, q35)
	}
	for name, m := range map[string]func(*v1.VirtualMachineInstance){
		"pc":               func(v *v1.VirtualMachineInstance) { v.Spec.Domain.Machine = &v1.Machine{Type: "pc"} },
		"hotplug disabled": func(v *v1.VirtualMachineInstance) { v.Spec.Domain.Devices.DisableHotplug = true },
	} {
		if n := ports(newVMI(m)); n != 0 {
			t.Errorf("%s: %d root ports, want none", name, n)
		}
	}
}
