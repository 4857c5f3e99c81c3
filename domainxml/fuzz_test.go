package domainxml

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// domainSchema is the RNG schema virt-xml-validate checks domains against.
const domainSchema = "/usr/share/libvirt/schemas/domain.rng"

// FuzzConvert converts random VMIs: a VMI generated from seed, with the
// JSON in patch merged over it (the fuzzer mutates both). Convert must not
// panic; it either fails with a *FieldError or returns a domain whose XML
// parses back. Outside fuzzing (the seed corpus in go test) every converted
// domain must also pass virt-xml-validate.
func FuzzConvert(f *testing.F) {
	for seed := uint64(0); seed < 12; seed++ {
		f.Add(seed, []byte(nil))
	}
	for _, tc := range goldenCases {
		vmi := loadVMI(f, filepath.Join("testdata", tc.name+".vmi.yaml"))
		data, err := json.Marshal(vmi)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint64(0), data)
	}
	var validator string
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	if !fuzzing {
		validator = requireXMLValidator(f)
	}
	f.Fuzz(func(t *testing.T, seed uint64, patch []byte) {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		vmi, opts := randomCase(r)
		if len(patch) > 0 {
			if err := json.Unmarshal(patch, vmi); err != nil {
				return // not a VMI: nothing to convert
			}
			opts.Emulation = seed%2 == 1
		}
		xml, ok := convertChecked(t, vmi, opts)
		if !ok || fuzzing {
			return
		}
		file := filepath.Join(t.TempDir(), "domain.xml")
		if err := os.WriteFile(file, []byte(xml), 0o644); err != nil {
			t.Fatal(err)
		}
		validateXML(t, validator, file)
	})
}

// TestRandomVMIsValidate converts a few hundred random VMIs and validates
// every domain that converts against libvirt's schema in one xmllint run
// (what virt-xml-validate runs, file by file).
func TestRandomVMIsValidate(t *testing.T) {
	requireXMLValidator(t)
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatalf("xmllint is not installed (Debian package libxml2-utils); install it with `make test-deps` or hack/setup-libvirt.sh")
	}
	const n = 400
	dir := t.TempDir()
	var files []string
	errs := map[string]int{}
	for seed := uint64(1000); seed < 1000+n; seed++ {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		vmi, opts := randomCase(r)
		xml, ok := convertChecked(t, vmi, opts)
		if !ok {
			_, err := Convert(vmi, opts)
			var fe *FieldError
			if errors.As(err, &fe) {
				errs[fieldKind(fe.Field)]++
			}
			continue
		}
		file := filepath.Join(dir, fmt.Sprintf("seed-%d.xml", seed))
		if err := os.WriteFile(file, []byte(xml), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	t.Logf("%d of %d random VMIs converted; rejected by field: %v", len(files), n, errs)
	if len(files) < n/4 {
		t.Fatalf("only %d of %d random VMIs converted: the generator makes too few valid ones to test anything", len(files), n)
	}
	out, err := exec.Command(xmllint, append([]string{"--noout", "--relaxng", domainSchema}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("xmllint --relaxng %s: %v\n%s", domainSchema, err, tail(string(out), 4000))
	}
}

// convertChecked converts vmi and checks the invariants of a successful
// conversion; ok is false when Convert rejected the VMI with a FieldError.
func convertChecked(t *testing.T, vmi *v1.VirtualMachineInstance, opts Options) (xml string, ok bool) {
	t.Helper()
	dom, err := Convert(vmi, opts)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field == "" || fe.Message == "" {
			t.Fatalf("Convert: %v (%T), want a *FieldError naming a field", err, err)
		}
		return "", false
	}
	xml, err = Marshal(dom)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var back libvirtxml.Domain
	if err := back.Unmarshal(xml); err != nil {
		t.Fatalf("the XML does not parse back: %v\n%s", err, xml)
	}
	if back.Name != dom.Name || back.UUID != dom.UUID {
		t.Fatalf("parsed back name/UUID %s/%s, want %s/%s", back.Name, back.UUID, dom.Name, dom.UUID)
	}
	return xml, true
}

// fieldKind shortens a field path to its kind: indexes dropped.
func fieldKind(f string) string {
	var b strings.Builder
	skip := false
	for _, r := range f {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// pick returns one of options at random.
func pick[T any](r *rand.Rand, options ...T) T { return options[r.IntN(len(options))] }

// badChance is how often the generator picks a value Convert must reject;
// small, so that most VMIs convert despite having dozens of fields.
const badChance = 0.01

// choose picks from good or, with probability badChance, from bad.
func choose[T any](r *rand.Rand, good []T, bad ...T) T {
	if len(bad) > 0 && chance(r, badChance) {
		return pick(r, bad...)
	}
	return pick(r, good...)
}

// chance is true with probability p.
func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// randomCase returns a random VMI and node options to convert it with.
func randomCase(r *rand.Rand) (*v1.VirtualMachineInstance, Options) {
	opts := Options{
		Emulation: chance(r, 0.5),
		SerialPTY: chance(r, 0.2),
		CPUModel:  pick(r, "", "", "", "host-passthrough", "Skylake-Client"),
		CPUSet:    []uint{2, 3, 4, 5, 6, 7, 8, 9, 10}[:r.IntN(10)],
		Disks:     map[string]DiskSource{},
	}
	return randomVMI(r, &opts), opts
}

// randomVMI returns a VMI setting, at random, every field Convert reads:
// mostly values that convert, sometimes values Convert must reject. It
// records block devices for LUNs in opts.
func randomVMI(r *rand.Rand, opts *Options) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Namespace = choose(r, []string{"default", "apps"}, "")
	vmi.Name = choose(r, []string{"vm", "web-1", "a.b", `x<&>"y'`}, "")
	vmi.UID = types.UID(choose(r, []string{"0f6b3c6e-2a7d-4a5e-9a51-7f1e3d0c9b11", "5d0a7e39-8b0f-4c8e-bf0e-2a33c8f6d1a2", "not-a-uuid"}, ""))
	s := &vmi.Spec
	s.Architecture = choose(r, []string{"", "", "", "", "", "amd64", "arm64"}, "s390x")
	if chance(r, 0.2) {
		s.TerminationGracePeriodSeconds = ptr(int64(r.IntN(600)))
	}
	d := &s.Domain

	d.Resources.Requests = corev1.ResourceList{}
	if !chance(r, badChance) {
		d.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(choose(r, []string{"64Mi", "128Mi", "1Gi", "2Gi", "1000M"}, "512Ki"))
	}
	if chance(r, 0.3) {
		d.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(pick(r, "100m", "1", "2", "2500m"))
	}
	if chance(r, 0.1) {
		d.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	}
	if chance(r, 0.5) {
		cpu := &v1.CPU{
			Sockets: uint32(r.IntN(3)), Cores: uint32(r.IntN(5)), Threads: uint32(r.IntN(3)),
			Model: choose(r, []string{"", "", "host-model", "host-passthrough", "qemu64", "Skylake-Client-IBRS"}, "bad model"),
		}
		if chance(r, 0.1) {
			cpu.MaxSockets = max(cpu.Sockets, 1) + uint32(r.IntN(3))
			if chance(r, badChance) {
				cpu.MaxSockets = 0
			}
		}
		for i := r.IntN(3); i > 0; i-- {
			cpu.Features = append(cpu.Features, v1.CPUFeature{
				Name:   choose(r, []string{"pcid", "x2apic", "vmx", "sse4.2"}, "bad name"),
				Policy: choose(r, []string{"", "require", "disable", "optional"}, "bogus"),
			})
		}
		cpu.DedicatedCPUPlacement = chance(r, 0.2)
		cpu.IsolateEmulatorThread = cpu.DedicatedCPUPlacement && chance(r, 0.5) || chance(r, badChance)
		d.CPU = cpu
	}
	if chance(r, 0.3) {
		m := &v1.Memory{}
		if chance(r, 0.7) {
			m.Guest = quantity(choose(r, []string{"256Mi", "1Gi", "4Gi"}, "1025Mi"))
		}
		if chance(r, 0.5) {
			m.Hugepages = &v1.Hugepages{PageSize: choose(r, []string{"2Mi", "2Mi", "1Gi"}, "3Mi", "")}
		}
		if chance(r, badChance) {
			m.MaxGuest = quantity("8Gi")
		}
		d.Memory = m
	}
	if chance(r, 0.4) {
		d.Machine = &v1.Machine{Type: choose(r, []string{"q35", "pc", "pc-q35-7.2"}, "virt", "bad machine")}
	}
	if chance(r, 0.5) {
		fw := &v1.Firmware{Serial: pick(r, "", "SN-1", `<odd "serial">`)}
		if chance(r, 0.2) {
			fw.UUID = types.UID(choose(r, []string{"6A1B2C3D-4E5F-4a6b-8c7d-9e0f1a2b3c4d"}, "bogus"))
		}
		switch r.IntN(40) {
		case 0, 1, 2, 3, 4, 5, 6, 7:
			fw.Bootloader = &v1.Bootloader{BIOS: &v1.BIOS{UseSerial: ptr(chance(r, 0.5))}}
		case 8, 9, 10, 11, 12, 13, 14, 15:
			fw.Bootloader = &v1.Bootloader{EFI: &v1.EFI{SecureBoot: pick(r, nil, ptr(true), ptr(false))}}
		case 16:
			fw.Bootloader = &v1.Bootloader{BIOS: &v1.BIOS{}, EFI: &v1.EFI{}}
		}
		if chance(r, 0.3) {
			kb := &v1.KernelBoot{KernelArgs: pick(r, "", "console=ttyS0 quiet", "a=\"b\" <c>")}
			if !chance(r, badChance) {
				kb.Container = &v1.KernelBootContainer{Image: "img",
					KernelPath: choose(r, []string{"/boot/vmlinuz"}, ""),
					InitrdPath: pick(r, "/boot/initrd", "")}
			}
			fw.KernelBoot = kb
		}
		d.Firmware = fw
	}
	if s.Architecture == "arm64" && !chance(r, badChance) {
		// arm64 boots only with EFI.
		if d.Firmware == nil {
			d.Firmware = &v1.Firmware{}
		}
		d.Firmware.Bootloader = &v1.Bootloader{EFI: &v1.EFI{}}
	}
	if chance(r, 0.4) {
		f := &v1.Features{ACPI: v1.FeatureState{Enabled: pick(r, nil, nil, ptr(true), ptr(false))}}
		if chance(r, 0.5) {
			f.APIC = &v1.FeatureAPIC{Enabled: pick(r, nil, ptr(true), ptr(false)), EndOfInterrupt: chance(r, 0.5)}
		}
		if chance(r, 0.3) {
			f.SMM = &v1.FeatureState{Enabled: choose(r, []*bool{nil, ptr(true)}, ptr(false))}
		}
		if chance(r, 0.3) {
			f.KVM = &v1.FeatureKVM{Hidden: chance(r, 0.5)}
		}
		if chance(r, 0.3) {
			f.Pvspinlock = &v1.FeatureState{Enabled: pick(r, nil, ptr(true), ptr(false))}
		}
		d.Features = f
	}
	if chance(r, 0.4) {
		c := &v1.Clock{}
		switch r.IntN(20) {
		case 0, 1, 2, 3, 4, 5, 6, 7, 8:
			c.UTC = &v1.ClockOffsetUTC{OffsetSeconds: pick(r, nil, ptr(3600), ptr(-60))}
		case 9, 10, 11, 12, 13, 14, 15, 16, 17:
			tz := v1.ClockOffsetTimezone(choose(r, []string{"Europe/Berlin", "America/New_York", "Etc/GMT+5"}, "bad zone"))
			c.Timezone = &tz
		case 18:
			tz := v1.ClockOffsetTimezone("UTC")
			c.UTC, c.Timezone = &v1.ClockOffsetUTC{}, &tz
		}
		if chance(r, 0.6) {
			policy := func() string { return choose(r, []string{"", "delay", "catchup"}, "merge", "bogus") }
			t := &v1.Timer{}
			if chance(r, 0.5) {
				t.HPET = &v1.HPETTimer{TickPolicy: choose(r, []string{"", "delay", "catchup", "merge", "discard"}, "bogus"), Enabled: pick(r, nil, ptr(false))}
			}
			if chance(r, 0.5) {
				t.KVM = &v1.KVMTimer{Enabled: pick(r, nil, ptr(false))}
			}
			if chance(r, 0.5) {
				t.PIT = &v1.PITTimer{TickPolicy: policy()}
			}
			if chance(r, 0.5) {
				t.RTC = &v1.RTCTimer{TickPolicy: policy(), Track: choose(r, []string{"", "guest", "wall"}, "moon")}
			}
			c.Timer = t
		}
		d.Clock = c
	}
	if chance(r, 0.2) {
		p := v1.IOThreadsPolicy(choose(r, []string{"shared", "auto"}, "bogus"))
		d.IOThreadsPolicy = &p
	}
	randomDevices(r, vmi, opts)
	return vmi
}

func randomDevices(r *rand.Rand, vmi *v1.VirtualMachineInstance, opts *Options) {
	dev := &vmi.Spec.Domain.Devices
	optBool := func() *bool { return pick(r, nil, nil, ptr(true), ptr(false)) }
	dev.UseVirtioTransitional = optBool()
	dev.AutoattachGraphicsDevice = optBool()
	dev.AutoattachSerialConsole = optBool()
	dev.AutoattachMemBalloon = optBool()
	dev.AutoattachInputDevice = optBool()
	dev.BlockMultiQueue = optBool()
	dev.NetworkInterfaceMultiQueue = optBool()
	if chance(r, 0.3) {
		dev.Rng = &v1.Rng{}
	}
	if chance(r, 0.2) {
		w := &v1.Watchdog{Name: choose(r, []string{"wd"}, "w d")}
		if !chance(r, badChance) {
			w.I6300ESB = &v1.I6300ESBWatchdog{Action: choose(r, []string{"", "reset", "poweroff", "shutdown"}, "explode")}
		}
		dev.Watchdog = w
	}
	for i := r.IntN(3); i > 0; i-- {
		dev.Inputs = append(dev.Inputs, v1.Input{
			Name: fmt.Sprintf("in%d", i), Type: choose(r, []string{"tablet"}, "mouse"), Bus: choose(r, []string{"", "usb", "virtio"}, "ps2"),
		})
	}

	buses := []v1.DiskBus{"", v1.DiskBusVirtio, v1.DiskBusVirtio, v1.DiskBusSATA, v1.DiskBusSCSI, v1.DiskBusUSB}
	sources := []func(name string) v1.VolumeSource{
		func(string) v1.VolumeSource {
			return v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}
		},
		func(n string) v1.VolumeSource {
			return v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}}
		},
		func(n string) v1.VolumeSource { return v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: n}} },
		func(string) v1.VolumeSource { return v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{}} },
		func(string) v1.VolumeSource {
			return v1.VolumeSource{HostDisk: &v1.HostDisk{Path: choose(r, []string{"/data/disk.img", "/var/lib/images/vm.qcow2"}, "relative.img", "/data/.."), Type: v1.HostDiskExists}}
		},
		func(string) v1.VolumeSource {
			return v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config"}}
		},
		func(string) v1.VolumeSource {
			return v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{UserData: "#cloud-config"}}
		},
		func(n string) v1.VolumeSource { return v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}} },
		func(string) v1.VolumeSource { return v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}} },
		func(string) v1.VolumeSource { return v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{}} },
		func(string) v1.VolumeSource { return v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}} },
		func(string) v1.VolumeSource {
			return v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}
		},
	}
	bootOrders := []uint{1, 2, 3}
	for i := r.IntN(7); i > 0; i-- {
		name := fmt.Sprintf("d%d", i)
		if chance(r, badChance) {
			name = pick(r, "..", "bad name", "")
		}
		disk := v1.Disk{Name: name, Serial: choose(r, []string{"", "", "SER-1"}, "bad serial"),
			Cache: v1.DriverCache(choose(r, []string{"", "", "", "none", "writethrough", "writeback"}, "bogus")),
			IO:    v1.DriverIO(choose(r, []string{"", "", "", "threads"}, "native", "bogus")),
		}
		switch r.IntN(12) {
		case 0, 1, 2, 3, 4, 5, 6:
			disk.Disk = &v1.DiskTarget{Bus: choose(r, buses, "ide"), ReadOnly: chance(r, 0.15)}
			if chance(r, 0.1) {
				disk.Disk.PciAddress = choose(r, []string{fmt.Sprintf("0000:00:%02x.0", 10+i)}, "bad")
			}
		case 7, 8, 9:
			disk.CDRom = &v1.CDRomTarget{Bus: choose(r, []v1.DiskBus{"", v1.DiskBusSATA, v1.DiskBusSCSI, v1.DiskBusUSB}, v1.DiskBusVirtio, "ide"), ReadOnly: choose(r, []*bool{nil, ptr(true)}, ptr(false)),
				Tray: v1.TrayState(choose(r, []string{"", "open", "closed"}, "ajar"))}
		case 10:
			disk.LUN = &v1.LunTarget{Bus: choose(r, []v1.DiskBus{"", v1.DiskBusSCSI}, v1.DiskBusVirtio), Reservation: chance(r, badChance)}
		}
		if chance(r, 0.3) && len(bootOrders) > 0 {
			k := r.IntN(len(bootOrders))
			disk.BootOrder = ptr(bootOrders[k])
			if chance(r, 0.9) {
				bootOrders = append(bootOrders[:k], bootOrders[k+1:]...)
			}
		}
		disk.DedicatedIOThread = pick(r, nil, nil, ptr(true))
		if disk.DedicatedIOThread != nil && !isVirtioDisk(&disk) && !chance(r, badChance) {
			disk.DedicatedIOThread = nil
		}
		disk.Shareable = pick(r, nil, nil, ptr(true))
		if disk.Shareable != nil && !chance(r, badChance) {
			disk.Cache = pick(r, v1.CacheNone, "")
		}
		if disk.IO == v1.IONative && disk.Cache != v1.CacheNone && !chance(r, badChance) {
			disk.Cache = ""
		}
		src := pick(r, sources...)(name)
		if chance(r, badChance) {
			src = pick(r, v1.VolumeSource{Sysprep: &v1.SysprepSource{}}, v1.VolumeSource{})
		}
		iso := src.CloudInitNoCloud != nil || src.CloudInitConfigDrive != nil || src.ConfigMap != nil ||
			src.Secret != nil || src.ServiceAccount != nil || src.DownwardAPI != nil
		if t := disk.Disk; t != nil && (iso || t.ReadOnly) && t.Bus == v1.DiskBusSATA && !chance(r, badChance) {
			t.Bus = v1.DiskBusVirtio // QEMU's SATA disks cannot be read-only
		}
		if t := disk.Disk; t != nil && t.PciAddress != "" && t.Bus != "" && t.Bus != v1.DiskBusVirtio && !chance(r, badChance) {
			t.Bus = v1.DiskBusVirtio
		}
		if disk.LUN != nil && !chance(r, badChance) {
			opts.Disks[name] = DiskSource{Path: "/dev/" + name, Block: true}
		} else if chance(r, 0.1) {
			opts.Disks[name] = DiskSource{Path: "/dev/" + name, Block: true}
		}
		dev.Disks = append(dev.Disks, disk)
		if !chance(r, badChance) {
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: name, VolumeSource: src})
		}
	}

	pods := 0
	for i := r.IntN(4); i > 0; i-- {
		name := fmt.Sprintf("n%d", i)
		iface := v1.Interface{Name: name,
			Model:      choose(r, []string{"", "virtio", "e1000", "e1000e", "rtl8139"}, "vmxnet3"),
			MacAddress: choose(r, []string{"", "", "02:00:00:00:00:0" + fmt.Sprint(i)}, "01:00:5e:00:00:01", "zz"),
		}
		switch r.IntN(40) {
		case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19:
			iface.Masquerade = &v1.InterfaceMasquerade{}
		case 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37:
			iface.Bridge = &v1.InterfaceBridge{}
		case 38:
			iface.SRIOV = &v1.InterfaceSRIOV{}
		}
		if chance(r, 0.2) && len(bootOrders) > 0 {
			iface.BootOrder = ptr(bootOrders[0])
		}
		if chance(r, 0.05) {
			iface.PciAddress = fmt.Sprintf("0000:00:%02x.0", 20+i)
		}
		net := v1.Network{Name: name}
		if pods == 0 && chance(r, 0.6) || chance(r, badChance) {
			net.Pod = &v1.PodNetwork{}
			pods++
		} else {
			net.Multus = &v1.MultusNetwork{NetworkName: "net-" + name}
			if iface.Masquerade != nil && !chance(r, badChance) {
				iface.Masquerade, iface.Bridge = nil, &v1.InterfaceBridge{}
			}
		}
		dev.Interfaces = append(dev.Interfaces, iface)
		if !chance(r, badChance) {
			vmi.Spec.Networks = append(vmi.Spec.Networks, net)
		}
	}
}
