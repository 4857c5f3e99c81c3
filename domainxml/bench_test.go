package domainxml

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// benchSmall is the VMI KubeVirt's numbers in the issue refer to: a
// container disk, a cloud-init disk and the pod network.
func benchSmall() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "small", UID: "0f6b3c6e-2a7d-4a5e-9a51-7f1e3d0c9b11"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				Devices: v1.Devices{
					Disks: []v1.Disk{
						{Name: "containerdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
						{Name: "cloudinitdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
					},
					Interfaces: []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}},
				},
			},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Volumes: []v1.Volume{
				{Name: "containerdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/kubevirt/cirros-container-disk-demo"}}},
				{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\npassword: cirros\n"}}},
			},
		},
	}
}

// benchMedium adds a PVC and an empty disk, a second NIC on a Multus
// network, a CPU topology, features, timers, an RNG and a tablet.
func benchMedium() *v1.VirtualMachineInstance {
	vmi := benchSmall()
	vmi.Name = "medium"
	s := &vmi.Spec
	s.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 2, Threads: 1}
	s.Domain.Features = &v1.Features{APIC: &v1.FeatureAPIC{}, SMM: &v1.FeatureState{}}
	s.Domain.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{}}, Timer: &v1.Timer{HPET: &v1.HPETTimer{Enabled: v1.BoolPtr(false)}, PIT: &v1.PITTimer{TickPolicy: "delay"}, RTC: &v1.RTCTimer{TickPolicy: "catchup"}}}
	s.Domain.Devices.Rng = &v1.Rng{}
	s.Domain.Devices.Inputs = []v1.Input{{Name: "tablet", Type: "tablet", Bus: "usb"}}
	bootOrder := uint(1)
	s.Domain.Devices.Disks = append(s.Domain.Devices.Disks,
		v1.Disk{Name: "data", BootOrder: &bootOrder, DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
		v1.Disk{Name: "scratch", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}})
	s.Volumes = append(s.Volumes,
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}})
	s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, v1.Interface{Name: "storage", Model: "virtio", MacAddress: "02:00:00:00:00:02", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}})
	s.Networks = append(s.Networks, v1.Network{Name: "storage", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "storage"}}})
	return vmi
}

// benchLarge has 16 disks over four buses, 4 NICs, 8 dedicated vCPUs on
// huge pages, I/O threads, a watchdog and EFI.
func benchLarge() *v1.VirtualMachineInstance {
	vmi := benchMedium()
	vmi.Name = "large"
	s := &vmi.Spec
	s.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 2, Threads: 2, DedicatedCPUPlacement: true, IsolateEmulatorThread: true}
	guest := resource.MustParse("8Gi")
	s.Domain.Memory = &v1.Memory{Guest: &guest, Hugepages: &v1.Hugepages{PageSize: "2Mi"}}
	s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{}}, Serial: "large-0001"}
	policy := v1.IOThreadsPolicyAuto
	s.Domain.IOThreadsPolicy = &policy
	s.Domain.Devices.Watchdog = &v1.Watchdog{Name: "wd", WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{}}}
	buses := []v1.DiskBus{v1.DiskBusVirtio, v1.DiskBusSCSI, v1.DiskBusSATA, v1.DiskBusVirtio}
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("pvc%d", i)
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, v1.Disk{Name: name, Serial: name, Cache: v1.CacheNone, DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: buses[i%4]}}})
		s.Volumes = append(s.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}})
	}
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("net%d", i+2)
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, v1.Interface{Name: name, InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}})
		s.Networks = append(s.Networks, v1.Network{Name: name, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: name}}})
	}
	return vmi
}

var benchOptions = Options{Emulation: true, CPUSet: []uint{0, 1, 2, 3, 4, 5, 6, 7, 8}}

// BenchmarkConvert measures Convert plus Marshal: VMI in, domain XML out.
func BenchmarkConvert(b *testing.B) {
	for _, bc := range []struct {
		name string
		vmi  *v1.VirtualMachineInstance
	}{{"small", benchSmall()}, {"medium", benchMedium()}, {"large", benchLarge()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				dom, err := Convert(bc.vmi, benchOptions)
				if err != nil {
					b.Fatal(err)
				}
				xml, err := Marshal(dom)
				if err != nil {
					b.Fatal(err)
				}
				n = len(xml)
			}
			b.ReportMetric(float64(n), "xml-bytes")
		})
	}
}

// BenchmarkConvertOnly and BenchmarkMarshal split the two halves.
func BenchmarkConvertOnly(b *testing.B) {
	vmi := benchSmall()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Convert(vmi, benchOptions); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	dom, err := Convert(benchSmall(), benchOptions)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(dom); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchVMIsConvert keeps the benchmark inputs valid: a benchmark that
// fails at once measures nothing.
func TestBenchVMIsConvert(t *testing.T) {
	for _, vmi := range []*v1.VirtualMachineInstance{benchSmall(), benchMedium(), benchLarge()} {
		dom, err := Convert(vmi, benchOptions)
		if err != nil {
			t.Fatalf("%s: %v", vmi.Name, err)
		}
		if _, err := Marshal(dom); err != nil {
			t.Fatalf("%s: %v", vmi.Name, err)
		}
	}
}
