package domainxml

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestMarshalMatchesLibvirtxml covers both paths of Marshal: converted
// domains (fast) and domains a caller extended with fields Convert never
// sets (slow), each against libvirtxml's own marshalling.
func TestMarshalMatchesLibvirtxml(t *testing.T) {
	converted := func(t *testing.T) *libvirtxml.Domain {
		vmi := loadVMI(t, "testdata/many-disks.vmi.yaml")
		dom, err := Convert(vmi, goldenCases[len(goldenCases)-1].opts)
		if err != nil {
			t.Fatal(err)
		}
		return dom
	}
	for _, tc := range []struct {
		name   string
		modify func(*libvirtxml.Domain)
		fast   bool
	}{
		{"as converted", func(*libvirtxml.Domain) {}, true},
		{"lifecycle actions", func(d *libvirtxml.Domain) { d.OnPoweroff, d.OnReboot, d.OnCrash = "destroy", "restart", "preserve" }, true},
		{"text XML must escape", func(d *libvirtxml.Domain) {
			d.Name = "a<b>&\"c'\t\n\r\x01\xff\u00e9\U0001F600"
			d.Devices.Disks[0].Serial = "<&>"
		}, true},
		{"a title", func(d *libvirtxml.Domain) { d.Title = "title" }, false},
		{"a host device", func(d *libvirtxml.Domain) {
			d.Devices.Hostdevs = []libvirtxml.DomainHostdev{{Managed: "yes"}}
		}, false},
		{"a disk with a backing store", func(d *libvirtxml.Domain) {
			d.Devices.Disks[0].BackingStore = &libvirtxml.DomainDiskBackingStore{Index: 1}
		}, false},
		{"a disk source with a startup policy", func(d *libvirtxml.Domain) {
			d.Devices.Disks[0].Source.StartupPolicy = "optional"
		}, false},
		{"an interface with an MTU", func(d *libvirtxml.Domain) {
			d.Devices.Interfaces = []libvirtxml.DomainInterface{{MTU: &libvirtxml.DomainInterfaceMTU{Size: 1400}}}
		}, false},
		{"a CPU with NUMA cells", func(d *libvirtxml.Domain) {
			d.CPU.Numa = &libvirtxml.DomainNuma{Cell: []libvirtxml.DomainCell{{CPUs: "0", Memory: 1024}}}
		}, false},
		{"a TCP serial port", func(d *libvirtxml.Domain) {
			d.Devices.Serials[0].Source = &libvirtxml.DomainChardevSource{TCP: &libvirtxml.DomainChardevSourceTCP{Mode: "bind", Host: "::", Service: "4555"}}
		}, false},
		{"a guest agent channel as libvirt reports it", func(d *libvirtxml.Domain) {
			d.Devices.Channels[0].Source.UNIX.Mode = "bind"
			d.Devices.Channels[0].Source.UNIX.Path = "/var/lib/libvirt/qemu/channel/target/domain-1-default_vm/org.qemu.guest_agent.0"
			d.Devices.Channels[0].Target.VirtIO.State = "connected"
			d.Devices.Channels[0].Alias = &libvirtxml.DomainAlias{Name: "channel0"}
		}, true},
		{"a channel on a pty", func(d *libvirtxml.Domain) {
			d.Devices.Channels[0].Source = &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{Path: "/dev/pts/3"}}
		}, true},
		{"a guestfwd channel", func(d *libvirtxml.Domain) {
			d.Devices.Channels[0].Target = &libvirtxml.DomainChannelTarget{GuestFWD: &libvirtxml.DomainChannelTargetGuestFWD{Address: "10.0.2.1", Port: "4600"}}
		}, false},
		{"a channel with a virtio-serial address", func(d *libvirtxml.Domain) {
			d.Devices.Channels[0].Address = &libvirtxml.DomainAddress{VirtioSerial: &libvirtxml.DomainAddressVirtioSerial{}}
		}, false},
		{"a second graphics type", func(d *libvirtxml.Domain) {
			d.Devices.Graphics = append(d.Devices.Graphics, libvirtxml.DomainGraphic{Spice: &libvirtxml.DomainGraphicSpice{}})
		}, false},
		{"an unmarshalled domain (XMLName set)", func(d *libvirtxml.Domain) {
			s, _ := d.Marshal()
			*d = libvirtxml.Domain{}
			if err := d.Unmarshal(s); err != nil {
				panic(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dom := converted(t)
			tc.modify(dom)
			if got := fastDomain(dom); got != tc.fast {
				t.Errorf("fast path = %v, want %v", got, tc.fast)
			}
			got, err := Marshal(dom)
			if err != nil {
				t.Fatal(err)
			}
			want, err := dom.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Marshal differs from libvirtxml (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarshalNil(t *testing.T) {
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
}

// TestMarshalGrowsItsBuffer marshals a domain far larger than the first
// buffer guess.
func TestMarshalGrowsItsBuffer(t *testing.T) {
	vmi := newVMI()
	for i := 0; i < 40; i++ {
		name := strings.Repeat("x", 50) + targetName("", i)
		withDisk(v1.Disk{Name: name, Serial: "S"}, pvc)(vmi)
	}
	dom, err := Convert(vmi, Options{PrivateDir: "/" + strings.Repeat("p", 500)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := Marshal(dom)
	want, _ := dom.Marshal()
	if got != want {
		t.Error("Marshal differs from libvirtxml on a large domain")
	}
}
