package instancetype_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func ptr[T any](v T) *T { return &v }

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// small is 2 vCPUs and 1Gi.
func small() *instancetypev1beta1.VirtualMachineInstancetypeSpec {
	return &instancetypev1beta1.VirtualMachineInstancetypeSpec{
		CPU:    instancetypev1beta1.CPUInstancetype{Guest: 2},
		Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")},
	}
}

func topology(t instancetypev1beta1.PreferredCPUTopology) *instancetypev1beta1.VirtualMachinePreferenceSpec {
	return &instancetypev1beta1.VirtualMachinePreferenceSpec{CPU: &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &t}}
}

func spread(across instancetypev1beta1.SpreadAcross, ratio uint32) *instancetypev1beta1.VirtualMachinePreferenceSpec {
	p := topology(instancetypev1beta1.Spread)
	p.CPU.SpreadOptions = &instancetypev1beta1.SpreadOptions{Across: &across}
	if ratio > 0 {
		p.CPU.SpreadOptions.Ratio = &ratio
	}
	return p
}

func TestTopology(t *testing.T) {
	cases := []struct {
		name                    string
		vcpus                   uint32
		pref                    *instancetypev1beta1.VirtualMachinePreferenceSpec
		sockets, cores, threads uint32
	}{
		{"one vCPU is one socket whatever the preference", 1, topology(instancetypev1beta1.Cores), 1, 1, 1},
		{"no preference: sockets", 4, nil, 4, 1, 1},
		{"sockets", 4, topology(instancetypev1beta1.Sockets), 4, 1, 1},
		{"deprecated preferSockets", 4, topology(instancetypev1beta1.DeprecatedPreferSockets), 4, 1, 1},
		{"any is sockets with an instance type", 4, topology(instancetypev1beta1.Any), 4, 1, 1},
		{"cores", 4, topology(instancetypev1beta1.Cores), 1, 4, 1},
		{"deprecated preferCores", 4, topology(instancetypev1beta1.DeprecatedPreferCores), 1, 4, 1},
		{"threads", 4, topology(instancetypev1beta1.Threads), 1, 1, 4},
		{"spread defaults to 2 cores per socket", 8, topology(instancetypev1beta1.Spread), 4, 2, 1},
		{"spread at preferSpreadSocketToCoreRatio", 12, func() *instancetypev1beta1.VirtualMachinePreferenceSpec {
			p := topology(instancetypev1beta1.DeprecatedPreferSpread)
			p.PreferSpreadSocketToCoreRatio = 3
			return p
		}(), 4, 3, 1},
		{"spread across sockets and cores at 4", 8, spread(instancetypev1beta1.SpreadAcrossSocketsCores, 4), 2, 4, 1},
		{"spread across cores and threads", 8, spread(instancetypev1beta1.SpreadAcrossCoresThreads, 0), 1, 4, 2},
		{"spread across sockets, cores and threads", 16, spread(instancetypev1beta1.SpreadAcrossSocketsCoresThreads, 2), 4, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c, th := instancetype.Topology(tc.vcpus, tc.pref)
			if s != tc.sockets || c != tc.cores || th != tc.threads {
				t.Errorf("Topology(%d) = %d sockets, %d cores, %d threads; want %d, %d, %d", tc.vcpus, s, c, th, tc.sockets, tc.cores, tc.threads)
			}
		})
	}
}

// vmiSpec is a template spec with one disk and one pod interface.
func vmiSpec() v1.VirtualMachineInstanceSpec {
	return v1.VirtualMachineInstanceSpec{
		Domain: v1.DomainSpec{Devices: v1.Devices{
			Disks:      []v1.Disk{{Name: "root"}},
			Interfaces: []v1.Interface{{Name: "default"}},
		}},
		Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
		Volumes:  []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}},
	}
}

func TestApplyInstancetype(t *testing.T) {
	cases := []struct {
		name   string
		it     func(*instancetypev1beta1.VirtualMachineInstancetypeSpec)
		pref   *instancetypev1beta1.VirtualMachinePreferenceSpec
		before func(*v1.VirtualMachineInstanceSpec, *metav1.ObjectMeta)
		// want changes vmiSpec() into the expected result.
		want     func(*v1.VirtualMachineInstanceSpec, *metav1.ObjectMeta)
		conflict string
	}{
		{
			name: "vCPUs become sockets and memory the guest's",
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 1, Threads: 1}
				s.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
			},
		},
		{
			name: "the preference's topology shapes the vCPUs",
			pref: topology(instancetypev1beta1.Threads),
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 2}
				s.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
			},
		},
		{
			name: "every field of the instance type",
			it: func(it *instancetypev1beta1.VirtualMachineInstancetypeSpec) {
				it.CPU = instancetypev1beta1.CPUInstancetype{Guest: 4, Model: ptr("host-passthrough"), DedicatedCPUPlacement: ptr(true),
					IsolateEmulatorThread: ptr(true), NUMA: &v1.NUMA{GuestMappingPassthrough: &v1.NUMAGuestMappingPassthrough{}},
					Realtime: &v1.Realtime{Mask: "0-1"}, MaxSockets: ptr(uint32(8))}
				it.Memory = instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("4Gi"), Hugepages: &v1.Hugepages{PageSize: "2Mi"}, MaxGuest: qty("8Gi")}
				it.NodeSelector = map[string]string{"gpu": "yes"}
				it.SchedulerName = "custom"
				it.GPUs = []v1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/A10"}}
				it.HostDevices = []v1.HostDevice{{Name: "dev1", DeviceName: "example.com/dev"}}
				it.IOThreadsPolicy = ptr(v1.IOThreadsPolicy("supplementalPool"))
				it.IOThreads = &v1.DiskIOThreads{SupplementalPoolThreadCount: ptr(uint32(2))}
				it.LaunchSecurity = &v1.LaunchSecurity{SEV: &v1.SEV{}}
				it.Annotations = map[string]string{"sized-by": "it"}
			},
			want: func(s *v1.VirtualMachineInstanceSpec, m *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Sockets: 4, Cores: 1, Threads: 1, MaxSockets: 8, Model: "host-passthrough", DedicatedCPUPlacement: true,
					IsolateEmulatorThread: true, NUMA: &v1.NUMA{GuestMappingPassthrough: &v1.NUMAGuestMappingPassthrough{}}, Realtime: &v1.Realtime{Mask: "0-1"}}
				s.Domain.Memory = &v1.Memory{Guest: qty("4Gi"), Hugepages: &v1.Hugepages{PageSize: "2Mi"}, MaxGuest: qty("8Gi")}
				s.NodeSelector = map[string]string{"gpu": "yes"}
				s.SchedulerName = "custom"
				s.Domain.Devices.GPUs = []v1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/A10"}}
				s.Domain.Devices.HostDevices = []v1.HostDevice{{Name: "dev1", DeviceName: "example.com/dev"}}
				s.Domain.IOThreadsPolicy = ptr(v1.IOThreadsPolicy("supplementalPool"))
				s.Domain.IOThreads = &v1.DiskIOThreads{SupplementalPoolThreadCount: ptr(uint32(2))}
				s.Domain.LaunchSecurity = &v1.LaunchSecurity{SEV: &v1.SEV{}}
				m.Annotations = map[string]string{"sized-by": "it"}
			},
		},
		{
			name: "overcommit lowers the memory request",
			it:   func(it *instancetypev1beta1.VirtualMachineInstancetypeSpec) { it.Memory.OvercommitPercent = 25 },
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 1, Threads: 1}
				s.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
				s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("768Mi")}
			},
		},
		{
			name: "the template's model with an instance type that names none",
			before: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Model: "Haswell", DedicatedCPUPlacement: true}
			},
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 1, Threads: 1, Model: "Haswell", DedicatedCPUPlacement: true}
				s.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
			},
		},
		{
			name: "sockets in the template conflict with the vCPUs",
			before: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Sockets: 2}
			},
			conflict: "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type (which sets spec.cpu.guest)",
		},
		{
			name: "CPU and memory requests and guest memory conflict, all reported",
			before: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
				s.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
			},
			conflict: "VM field(s) spec.template.spec.domain.resources.requests.cpu, spec.template.spec.domain.memory.guest, " +
				"spec.template.spec.domain.resources.requests.memory conflicts with selected instance type (which sets spec.cpu.guest, spec.memory.guest)",
		},
		{
			name: "a model both set",
			it:   func(it *instancetypev1beta1.VirtualMachineInstancetypeSpec) { it.CPU.Model = ptr("host-model") },
			before: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Model: "Haswell"}
			},
			conflict: "spec.template.spec.domain.cpu.model conflicts with selected instance type (which sets spec.cpu.model)",
		},
		{
			name: "GPUs, node selector and an annotation of another value",
			it: func(it *instancetypev1beta1.VirtualMachineInstancetypeSpec) {
				it.GPUs = []v1.GPU{{Name: "a"}}
				it.NodeSelector = map[string]string{"a": "b"}
				it.Annotations = map[string]string{"same": "1", "other": "it"}
			},
			before: func(s *v1.VirtualMachineInstanceSpec, m *metav1.ObjectMeta) {
				s.Domain.Devices.GPUs = []v1.GPU{{Name: "b"}}
				s.NodeSelector = map[string]string{}
				m.Annotations = map[string]string{"same": "1", "other": "template"}
			},
			conflict: "VM field(s) spec.template.spec.nodeSelector, spec.template.spec.domain.devices.gpus, spec.template.metadata.annotations[other] " +
				"conflicts with selected instance type (which sets spec.nodeSelector, spec.gpus, spec.annotations[other])",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := small()
			if tc.it != nil {
				tc.it(it)
			}
			vm := &v1.VirtualMachine{Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: vmiSpec()}}}
			if tc.before != nil {
				tc.before(&vm.Spec.Template.Spec, &vm.Spec.Template.ObjectMeta)
			}
			conflicts := instancetype.Apply(*instancetype.VMTemplate(vm), it, tc.pref)
			if tc.conflict != "" {
				if len(conflicts) == 0 || !strings.Contains(conflicts.Error(), tc.conflict) {
					t.Fatalf("conflicts = %v, want %q", conflicts, tc.conflict)
				}
				return
			}
			if len(conflicts) > 0 {
				t.Fatalf("unexpected conflicts: %v", conflicts)
			}
			want := vmiSpec()
			var wantMeta metav1.ObjectMeta
			tc.want(&want, &wantMeta)
			if diff := cmp.Diff(want, vm.Spec.Template.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantMeta.Annotations, vm.Spec.Template.ObjectMeta.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyPreference(t *testing.T) {
	bus := func(b v1.DiskBus) *v1.DiskTarget { return &v1.DiskTarget{Bus: b} }
	cases := []struct {
		name   string
		pref   instancetypev1beta1.VirtualMachinePreferenceSpec
		before func(*v1.VirtualMachineInstanceSpec)
		want   func(*v1.VirtualMachineInstanceSpec, *metav1.ObjectMeta)
	}{
		{
			name: "devices fill what the template leaves unset",
			pref: instancetypev1beta1.VirtualMachinePreferenceSpec{Devices: &instancetypev1beta1.DevicePreferences{
				PreferredDiskBus: v1.DiskBusSATA, PreferredCdromBus: v1.DiskBusSATA, PreferredDiskCache: v1.CacheNone,
				PreferredInterfaceModel: "e1000e", PreferredInterfaceMasquerade: &v1.InterfaceMasquerade{},
				PreferredRng: &v1.Rng{}, PreferredTPM: &v1.TPMDevice{Persistent: ptr(true)}, PreferredAutoattachGraphicsDevice: ptr(false),
				PreferredBlockMultiQueue: ptr(true), PreferredVideoType: ptr("virtio"), PreferredPanicDeviceModel: ptr(v1.PanicDeviceModelIsa),
			}},
			before: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, v1.Disk{Name: "virtio", DiskDevice: v1.DiskDevice{Disk: bus(v1.DiskBusVirtio)}},
					v1.Disk{Name: "cd", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{}}})
			},
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				d := &s.Domain.Devices
				d.Disks = []v1.Disk{
					{Name: "root", DiskDevice: v1.DiskDevice{Disk: bus(v1.DiskBusSATA)}, Cache: v1.CacheNone},
					{Name: "virtio", DiskDevice: v1.DiskDevice{Disk: bus(v1.DiskBusVirtio)}, Cache: v1.CacheNone},
					{Name: "cd", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusSATA}}},
				}
				d.Interfaces[0].Model = "e1000e"
				d.Interfaces[0].Masquerade = &v1.InterfaceMasquerade{}
				d.Rng = &v1.Rng{}
				d.TPM = &v1.TPMDevice{Persistent: ptr(true)}
				d.AutoattachGraphicsDevice = ptr(false)
				d.BlockMultiQueue = ptr(true)
				d.Video = &v1.VideoDevice{Type: "virtio"}
				d.PanicDevices = []v1.PanicDevice{{Model: ptr(v1.PanicDeviceModelIsa)}}
			},
		},
		{
			name: "the template's own values stay",
			pref: instancetypev1beta1.VirtualMachinePreferenceSpec{
				Devices:                                &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSATA, PreferredInterfaceModel: "e1000e", PreferredInterfaceMasquerade: &v1.InterfaceMasquerade{}, PreferredBlockMultiQueue: ptr(true)},
				Machine:                                &instancetypev1beta1.MachinePreferences{PreferredMachineType: "pc"},
				Firmware:                               &instancetypev1beta1.FirmwarePreferences{PreferredEfi: &v1.EFI{SecureBoot: ptr(true)}},
				PreferredTerminationGracePeriodSeconds: ptr(int64(600)),
			},
			before: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Disks[0].Disk = bus(v1.DiskBusVirtio)
				s.Domain.Devices.Interfaces[0].Model = "virtio"
				s.Domain.Devices.Interfaces[0].Bridge = &v1.InterfaceBridge{}
				s.Domain.Devices.BlockMultiQueue = ptr(false)
				s.Domain.Machine = &v1.Machine{Type: "q35"}
				s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{}}}
				s.TerminationGracePeriodSeconds = ptr(int64(0))
			},
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.Devices.Disks[0].Disk = bus(v1.DiskBusVirtio)
				s.Domain.Devices.Interfaces[0].Model = "virtio"
				s.Domain.Devices.Interfaces[0].Bridge = &v1.InterfaceBridge{}
				s.Domain.Devices.BlockMultiQueue = ptr(false)
				s.Domain.Machine = &v1.Machine{Type: "q35"}
				s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{}}}
				s.TerminationGracePeriodSeconds = ptr(int64(0))
			},
		},
		{
			name: "Windows: features, Hyper-V, clock, EFI, SMM, annotations",
			pref: instancetypev1beta1.VirtualMachinePreferenceSpec{
				Features: &instancetypev1beta1.FeaturePreferences{
					PreferredAcpi: &v1.FeatureState{}, PreferredApic: &v1.FeatureAPIC{}, PreferredSmm: &v1.FeatureState{},
					PreferredHyperv: &v1.FeatureHyperv{Relaxed: &v1.FeatureState{}, VAPIC: &v1.FeatureState{}, Spinlocks: &v1.FeatureSpinlocks{Retries: ptr(uint32(8191))}},
				},
				Clock: &instancetypev1beta1.ClockPreferences{
					PreferredClockOffset: &v1.ClockOffset{UTC: &v1.ClockOffsetUTC{}},
					PreferredTimer:       &v1.Timer{HPET: &v1.HPETTimer{Enabled: ptr(false)}, Hyperv: &v1.HypervTimer{}},
				},
				Firmware:              &instancetypev1beta1.FirmwarePreferences{PreferredEfi: &v1.EFI{SecureBoot: ptr(true), Persistent: ptr(true)}, DeprecatedPreferredUseSecureBoot: ptr(false)},
				Annotations:           map[string]string{"vm.kubevirt.io/os": "windows"},
				PreferredArchitecture: ptr("amd64"),
				PreferredSubdomain:    ptr("win"),
			},
			before: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Features = &v1.Features{Hyperv: &v1.FeatureHyperv{Relaxed: &v1.FeatureState{Enabled: ptr(false)}}}
			},
			want: func(s *v1.VirtualMachineInstanceSpec, m *metav1.ObjectMeta) {
				s.Domain.Features = &v1.Features{APIC: &v1.FeatureAPIC{}, SMM: &v1.FeatureState{},
					Hyperv: &v1.FeatureHyperv{Relaxed: &v1.FeatureState{Enabled: ptr(false)}, VAPIC: &v1.FeatureState{}, Spinlocks: &v1.FeatureSpinlocks{Retries: ptr(uint32(8191))}}}
				s.Domain.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{}}, Timer: &v1.Timer{HPET: &v1.HPETTimer{Enabled: ptr(false)}, Hyperv: &v1.HypervTimer{}}}
				s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{SecureBoot: ptr(true), Persistent: ptr(true)}}}
				s.Architecture = "amd64"
				s.Subdomain = "win"
				m.Annotations = map[string]string{"vm.kubevirt.io/os": "windows"}
			},
		},
		{
			name: "CPU features the template does not name",
			pref: instancetypev1beta1.VirtualMachinePreferenceSpec{CPU: &instancetypev1beta1.CPUPreferences{PreferredCPUFeatures: []v1.CPUFeature{{Name: "vmx"}, {Name: "pcid", Policy: "require"}}}},
			before: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.CPU = &v1.CPU{Features: []v1.CPUFeature{{Name: "vmx", Policy: "disable"}}}
			},
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &v1.CPU{Features: []v1.CPUFeature{{Name: "vmx", Policy: "disable"}, {Name: "pcid", Policy: "require"}}}
			},
		},
		{
			name: "BIOS with a serial console",
			pref: instancetypev1beta1.VirtualMachinePreferenceSpec{Firmware: &instancetypev1beta1.FirmwarePreferences{PreferredUseBios: ptr(true), PreferredUseBiosSerial: ptr(true), PreferredEfi: &v1.EFI{}}},
			want: func(s *v1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{UseSerial: ptr(true)}}}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := vmiSpec()
			if tc.before != nil {
				tc.before(&spec)
			}
			var meta metav1.ObjectMeta
			if c := instancetype.Apply(instancetype.Target{Spec: &spec, Meta: &meta}, nil, &tc.pref); c != nil {
				t.Fatalf("a preference alone has no conflicts: %v", c)
			}
			want := vmiSpec()
			var wantMeta metav1.ObjectMeta
			tc.want(&want, &wantMeta)
			if diff := cmp.Diff(want, spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantMeta.Annotations, meta.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConflictsApplyNoPreference: with a conflict, the preference is not applied.
func TestConflictsApplyNoPreference(t *testing.T) {
	spec := vmiSpec()
	spec.Domain.CPU = &v1.CPU{Cores: 2}
	pref := &instancetypev1beta1.VirtualMachinePreferenceSpec{Machine: &instancetypev1beta1.MachinePreferences{PreferredMachineType: "pc"}}
	c := instancetype.Apply(instancetype.Target{Spec: &spec}, small(), pref)
	if len(c) != 1 || c[0].Field.String() != "spec.domain.cpu.cores" || c[0].Instancetype != "spec.cpu.guest" {
		t.Fatalf("conflicts = %#v, want spec.domain.cpu.cores against spec.cpu.guest", c)
	}
	if spec.Domain.Machine != nil {
		t.Errorf("the preference was applied despite the conflict: machine %v", spec.Domain.Machine)
	}
}

func TestAnnotate(t *testing.T) {
	var m metav1.ObjectMeta
	instancetype.Annotate(&m, &v1.InstancetypeStatusRef{Name: "small", Kind: "virtualmachineinstancetype"}, &v1.InstancetypeStatusRef{Name: "fedora"})
	want := map[string]string{v1.InstancetypeAnnotation: "small", v1.ClusterPreferenceAnnotation: "fedora"}
	if diff := cmp.Diff(want, m.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func BenchmarkApply(b *testing.B) {
	pref := topology(instancetypev1beta1.Spread)
	pref.Devices = &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusVirtio, PreferredInterfaceModel: "virtio", PreferredRng: &v1.Rng{}}
	it := small()
	b.ReportAllocs()
	for b.Loop() {
		spec := vmiSpec()
		var meta metav1.ObjectMeta
		if c := instancetype.Apply(instancetype.Target{Spec: &spec, Meta: &meta}, it, pref); c != nil {
			b.Fatal(c)
		}
	}
}
