package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// equateQuantities compares quantities by value, so 1Gi equals 1024Mi.
var equateQuantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// defaultedPod is what defaulting adds to a spec without interfaces or networks.
func defaultedPod(spec *v1.VirtualMachineInstanceSpec) {
	spec.Domain.Devices.Interfaces = []v1.Interface{{
		Name:                   "default",
		Model:                  "virtio",
		InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}},
	}}
	spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
}

func TestSetDefaultsVirtualMachineInstanceSpec(t *testing.T) {
	tests := []struct {
		name string
		in   v1.VirtualMachineInstanceSpec
		// want is in with the expected defaults applied; every case also
		// gets the 30s grace period unless it sets one.
		want func(*v1.VirtualMachineInstanceSpec)
	}{
		{
			name: "empty spec gets a grace period and the pod network",
			want: defaultedPod,
		},
		{
			name: "disk without a device becomes a virtio disk",
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{{Name: "root"}}}}},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Disks[0].Disk = &v1.DiskTarget{Bus: v1.DiskBusVirtio}
				defaultedPod(s)
			},
		},
		{
			name: "disk keeps its bus",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{
				{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA, ReadOnly: true}}},
			}}}},
			want: defaultedPod,
		},
		{
			name: "CD-ROM gets the sata bus, read-only and a closed tray",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{
				{Name: "iso", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{}}},
			}}}},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Disks[0].CDRom = &v1.CDRomTarget{Bus: v1.DiskBusSATA, ReadOnly: v1.BoolPtr(true), Tray: v1.TrayStateClosed}
				defaultedPod(s)
			},
		},
		{
			name: "CD-ROM keeps its settings",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{
				{Name: "iso", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusSCSI, ReadOnly: v1.BoolPtr(false), Tray: v1.TrayStateOpen}}},
			}}}},
			want: defaultedPod,
		},
		{
			name: "LUN gets the scsi bus",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{
				{Name: "lun", DiskDevice: v1.DiskDevice{LUN: &v1.LunTarget{Reservation: true}}},
			}}}},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Disks[0].LUN.Bus = v1.DiskBusSCSI
				defaultedPod(s)
			},
		},
		{
			name: "interface gets the virtio model",
			in: v1.VirtualMachineInstanceSpec{
				Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
					{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
					{Name: "blue", Model: "e1000", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
				}}},
				Networks: []v1.Network{
					{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}},
					{Name: "blue", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}},
				},
			},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Interfaces[0].Model = "virtio"
			},
		},
		{
			name: "autoattachPodInterface true adds the pod network",
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{AutoattachPodInterface: v1.BoolPtr(true)}}},
			want: defaultedPod,
		},
		{
			name: "autoattachPodInterface false adds nothing",
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{AutoattachPodInterface: v1.BoolPtr(false)}}},
		},
		{
			name: "networks without interfaces are left alone",
			in: v1.VirtualMachineInstanceSpec{Networks: []v1.Network{
				{Name: "blue", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}},
			}},
		},
		{
			name: "grace period is kept, even zero",
			in:   v1.VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: int64Ptr(0)},
			want: defaultedPod,
		},
		{
			name: "an empty machine type gets amd64's; hugepages alone set no memory",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
				Machine: &v1.Machine{},
				Memory:  &v1.Memory{Hugepages: &v1.Hugepages{PageSize: "2Mi"}},
			}},
			want: func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Machine.Type = "q35"; defaultedPod(s) },
		},
		{
			name: "requests take the value of their limits",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: qty("2"), corev1.ResourceMemory: qty("2Gi")},
			}}},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: qty("2"), corev1.ResourceMemory: qty("2Gi")}
				s.Domain.Memory = &v1.Memory{Guest: ptrTo(qty("2Gi"))}
				defaultedPod(s)
			},
		},
		{
			name: "requests that are set are kept",
			in: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: qty("1Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: qty("2Gi")},
			}}},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Memory = &v1.Memory{Guest: ptrTo(qty("1Gi"))}
				defaultedPod(s)
			},
		},
	}
	// KubeVirt's admission defaults: the machine type by architecture, and
	// the guest's memory and the memory request from each other.
	mem := resource.MustParse("128Mi")
	tests = append(tests,
		struct {
			name string
			in   v1.VirtualMachineInstanceSpec
			want func(*v1.VirtualMachineInstanceSpec)
		}{
			name: "arm64 gets the virt machine, a set machine type stays",
			in:   v1.VirtualMachineInstanceSpec{Architecture: "arm64"},
			want: func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Machine = &v1.Machine{Type: "virt"}; defaultedPod(s) },
		},
		struct {
			name string
			in   v1.VirtualMachineInstanceSpec
			want func(*v1.VirtualMachineInstanceSpec)
		}{
			name: "memory request becomes the guest's memory",
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Machine: &v1.Machine{Type: "pc"}, Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem}}}},
			want: func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Memory = &v1.Memory{Guest: &mem}; defaultedPod(s) },
		},
		struct {
			name string
			in   v1.VirtualMachineInstanceSpec
			want func(*v1.VirtualMachineInstanceSpec)
		}{
			name: "guest memory becomes the memory request",
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
			want: func(s *v1.VirtualMachineInstanceSpec) {
				s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: mem}
				defaultedPod(s)
			},
		},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.in.DeepCopy()
			if want.TerminationGracePeriodSeconds == nil {
				want.TerminationGracePeriodSeconds = int64Ptr(30)
			}
			if want.Domain.Machine == nil {
				want.Domain.Machine = &v1.Machine{Type: "q35"}
			}
			if tt.want != nil {
				tt.want(want)
			}
			got := tt.in.DeepCopy()
			v1.SetDefaults_VirtualMachineInstanceSpec(got)
			if diff := cmp.Diff(want, got, equateQuantities); diff != "" {
				t.Errorf("SetDefaults_VirtualMachineInstanceSpec (-want +got):\n%s", diff)
			}
			v1.SetDefaults_VirtualMachineInstanceSpec(got)
			if diff := cmp.Diff(want, got, equateQuantities); diff != "" {
				t.Errorf("defaulting twice changed the spec again (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaultsVirtualMachineInstanceSpecDoesNotAlias(t *testing.T) {
	limit := qty("2Gi")
	spec := &v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: limit},
	}}}
	v1.SetDefaults_VirtualMachineInstanceSpec(spec)
	spec.Domain.Resources.Requests[corev1.ResourceMemory] = qty("1Gi")
	if got := spec.Domain.Resources.Limits[corev1.ResourceMemory]; got.Cmp(limit) != 0 {
		t.Errorf("changing the defaulted request changed the limit to %s", got.String())
	}
}

func TestSetDefaultsVirtualMachineInstance(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "testvmi", Namespace: "default"},
		Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{{Name: "root"}}}}},
	}
	v1.SetDefaults_VirtualMachineInstance(vmi)
	want := v1.VirtualMachineInstanceSpec{
		Domain:                        v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}}},
		TerminationGracePeriodSeconds: int64Ptr(30),
	}
	want.Domain.Machine = &v1.Machine{Type: "q35"}
	defaultedPod(&want)
	if diff := cmp.Diff(want, vmi.Spec, equateQuantities); diff != "" {
		t.Errorf("SetDefaults_VirtualMachineInstance (-want +got):\n%s", diff)
	}
	v1.SetDefaults_VirtualMachineInstance(nil) // must not panic
}

func TestSetDefaultsVirtualMachine(t *testing.T) {
	vm := &v1.VirtualMachine{Spec: v1.VirtualMachineSpec{
		RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways),
		Template:    &v1.VirtualMachineInstanceTemplateSpec{},
	}}
	v1.SetDefaults_VirtualMachine(vm)
	want := v1.VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: int64Ptr(30), Domain: v1.DomainSpec{Machine: &v1.Machine{Type: "q35"}}}
	defaultedPod(&want)
	if diff := cmp.Diff(want, vm.Spec.Template.Spec, equateQuantities); diff != "" {
		t.Errorf("SetDefaults_VirtualMachine template (-want +got):\n%s", diff)
	}
	if vm.Spec.Running != nil || *vm.Spec.RunStrategy != v1.RunStrategyAlways {
		t.Errorf("SetDefaults_VirtualMachine changed the run strategy: running=%v runStrategy=%v", vm.Spec.Running, *vm.Spec.RunStrategy)
	}

	noTemplate := &v1.VirtualMachine{}
	v1.SetDefaults_VirtualMachine(noTemplate)
	if noTemplate.Spec.Template != nil {
		t.Error("SetDefaults_VirtualMachine invented a template")
	}
	v1.SetDefaults_VirtualMachine(nil) // must not panic
}

func TestSetDefaultsVirtualMachineInstanceReplicaSet(t *testing.T) {
	tests := []struct {
		name string
		in   *int32
		want int32
	}{
		{name: "unset becomes 1", in: nil, want: 1},
		{name: "zero is kept", in: int32Ptr(0), want: 0},
		{name: "five is kept", in: int32Ptr(5), want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &v1.VirtualMachineInstanceReplicaSet{Spec: v1.VirtualMachineInstanceReplicaSetSpec{Replicas: tt.in}}
			v1.SetDefaults_VirtualMachineInstanceReplicaSet(rs)
			if rs.Spec.Replicas == nil || *rs.Spec.Replicas != tt.want {
				t.Errorf("replicas = %v, want %d", rs.Spec.Replicas, tt.want)
			}
		})
	}
	v1.SetDefaults_VirtualMachineInstanceReplicaSet(nil) // must not panic
}

func TestSetDefaultsKubeVirt(t *testing.T) {
	tests := []struct {
		name string
		in   v1.KubeVirtSpec
		want v1.KubeVirtSpec
	}{
		{
			name: "unset",
			want: v1.KubeVirtSpec{
				UninstallStrategy: v1.KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist,
				ImagePullPolicy:   corev1.PullIfNotPresent,
			},
		},
		{
			name: "set values are kept",
			in: v1.KubeVirtSpec{
				UninstallStrategy: v1.KubeVirtUninstallStrategyRemoveWorkloads,
				ImagePullPolicy:   corev1.PullAlways,
			},
			want: v1.KubeVirtSpec{
				UninstallStrategy: v1.KubeVirtUninstallStrategyRemoveWorkloads,
				ImagePullPolicy:   corev1.PullAlways,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := &v1.KubeVirt{Spec: tt.in}
			v1.SetDefaults_KubeVirt(kv)
			if diff := cmp.Diff(tt.want, kv.Spec, equateQuantities); diff != "" {
				t.Errorf("SetDefaults_KubeVirt (-want +got):\n%s", diff)
			}
		})
	}
	v1.SetDefaults_KubeVirt(nil) // must not panic
}

func ptrTo[T any](v T) *T { return &v }

// TestSetClusterDefaults: the KubeVirt CR's cpuModel, machine types, memory
// overcommit and default network interface decide the defaults they name,
// and only where the VMI leaves the field unset.
func TestSetClusterDefaults(t *testing.T) {
	guest := func(q string) v1.VirtualMachineInstanceSpec {
		g := qty(q)
		return v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &g}}}
	}
	tests := []struct {
		name string
		cfg  v1.KubeVirtConfiguration
		in   v1.VirtualMachineInstanceSpec
		// check looks at the defaulted spec.
		check func(t *testing.T, got *v1.VirtualMachineInstanceSpec)
	}{
		{
			name: "cpuModel fills an unset model",
			cfg:  v1.KubeVirtConfiguration{CPUModel: "Skylake-Client"},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if got.Domain.CPU == nil || got.Domain.CPU.Model != "Skylake-Client" {
					t.Errorf("cpu = %+v, want model Skylake-Client", got.Domain.CPU)
				}
			},
		},
		{
			name: "the VMI's own CPU model wins",
			cfg:  v1.KubeVirtConfiguration{CPUModel: "Skylake-Client"},
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Cores: 2, Model: "host-passthrough"}}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if got.Domain.CPU.Model != "host-passthrough" || got.Domain.CPU.Cores != 2 {
					t.Errorf("cpu = %+v, want host-passthrough with 2 cores", got.Domain.CPU)
				}
			},
		},
		{
			name: "cpuRequest for a guest that sets none",
			cfg:  v1.KubeVirtConfiguration{CPURequest: qtyPtr("250m")},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if q, ok := got.Domain.Resources.Requests[corev1.ResourceCPU]; !ok || q.Cmp(qty("250m")) != 0 {
					t.Errorf("cpu request %v (set %v), want 250m", &q, ok)
				}
			},
		},
		{
			name: "cpuRequest at KubeVirt's default leaves the request to the launcher pod",
			cfg:  v1.KubeVirtConfiguration{CPURequest: qtyPtr("0.1")},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if q, ok := got.Domain.Resources.Requests[corev1.ResourceCPU]; ok {
					t.Errorf("cpu request %v, want none", &q)
				}
			},
		},
		{
			name: "the VMI's CPU limit becomes its request, not cpuRequest",
			cfg:  v1.KubeVirtConfiguration{CPURequest: qtyPtr("250m")},
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: qty("2")}}}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if q := got.Domain.Resources.Requests[corev1.ResourceCPU]; q.Cmp(qty("2")) != 0 {
					t.Errorf("cpu request %v, want the limit 2", &q)
				}
			},
		},
		{
			name: "no cpuRequest for dedicated vCPUs",
			cfg:  v1.KubeVirtConfiguration{CPURequest: qtyPtr("250m")},
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Cores: 2, DedicatedCPUPlacement: true}}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if q, ok := got.Domain.Resources.Requests[corev1.ResourceCPU]; ok {
					t.Errorf("cpu request %v, want none", &q)
				}
			},
		},
		{
			name: "architectureConfiguration's machine type",
			cfg:  v1.KubeVirtConfiguration{ArchitectureConfiguration: &v1.ArchConfiguration{Amd64: &v1.ArchSpecificConfiguration{MachineType: "pc-q35-7.2"}}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if got.Domain.Machine.Type != "pc-q35-7.2" {
					t.Errorf("machine type %q, want pc-q35-7.2", got.Domain.Machine.Type)
				}
			},
		},
		{
			name: "the deprecated machineType wins over the architecture's",
			cfg: v1.KubeVirtConfiguration{MachineType: "pc-q35-8.0",
				ArchitectureConfiguration: &v1.ArchConfiguration{Amd64: &v1.ArchSpecificConfiguration{MachineType: "pc-q35-7.2"}}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if got.Domain.Machine.Type != "pc-q35-8.0" {
					t.Errorf("machine type %q, want pc-q35-8.0", got.Domain.Machine.Type)
				}
			},
		},
		{
			name: "the VMI's machine type wins",
			cfg:  v1.KubeVirtConfiguration{MachineType: "pc-q35-8.0"},
			in:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Machine: &v1.Machine{Type: "q35"}}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if got.Domain.Machine.Type != "q35" {
					t.Errorf("machine type %q, want q35", got.Domain.Machine.Type)
				}
			},
		},
		{
			name: "memoryOvercommit 150 requests two thirds of the guest's memory",
			cfg:  v1.KubeVirtConfiguration{DeveloperConfiguration: &v1.DeveloperConfiguration{MemoryOvercommit: 150}},
			in:   guest("3Gi"),
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				r := got.Domain.Resources.Requests[corev1.ResourceMemory]
				if want := qty("2Gi"); r.Cmp(want) != 0 {
					t.Errorf("memory request %s, want 2Gi", r.String())
				}
				if got.Domain.Memory.Guest.Cmp(qty("3Gi")) != 0 {
					t.Errorf("guest memory changed to %s", got.Domain.Memory.Guest.String())
				}
			},
		},
		{
			name: "memoryOvercommit leaves a request the VMI sets",
			cfg:  v1.KubeVirtConfiguration{DeveloperConfiguration: &v1.DeveloperConfiguration{MemoryOvercommit: 200}},
			in: func() v1.VirtualMachineInstanceSpec {
				s := guest("2Gi")
				s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: qty("2Gi")}
				return s
			}(),
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if r := got.Domain.Resources.Requests[corev1.ResourceMemory]; r.Cmp(qty("2Gi")) != 0 {
					t.Errorf("memory request %s, want the VMI's 2Gi", r.String())
				}
			},
		},
		{
			name: "defaultNetworkInterface masquerade",
			cfg:  v1.KubeVirtConfiguration{Network: &v1.NetworkConfiguration{DefaultNetworkInterface: "masquerade"}},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if len(got.Domain.Devices.Interfaces) != 1 || got.Domain.Devices.Interfaces[0].Masquerade == nil || got.Domain.Devices.Interfaces[0].Bridge != nil {
					t.Errorf("interfaces = %+v, want one masquerade", got.Domain.Devices.Interfaces)
				}
				if len(got.Networks) != 1 || got.Networks[0].Pod == nil {
					t.Errorf("networks = %+v, want the pod network", got.Networks)
				}
			},
		},
		{
			name: "defaultNetworkInterface leaves a VMI that names its interfaces",
			cfg:  v1.KubeVirtConfiguration{Network: &v1.NetworkConfiguration{DefaultNetworkInterface: "masquerade"}},
			in: v1.VirtualMachineInstanceSpec{
				Domain:   v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}}}},
				Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			},
			check: func(t *testing.T, got *v1.VirtualMachineInstanceSpec) {
				if got.Domain.Devices.Interfaces[0].Bridge == nil || got.Domain.Devices.Interfaces[0].Masquerade != nil {
					t.Errorf("interfaces = %+v, want the VMI's bridge", got.Domain.Devices.Interfaces)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.DeepCopy()
			if err := v1.SetClusterDefaults(got, &tt.cfg); err != nil {
				t.Fatalf("SetClusterDefaults: %v", err)
			}
			tt.check(t, got)
			again := got.DeepCopy()
			if err := v1.SetClusterDefaults(again, &tt.cfg); err != nil {
				t.Fatalf("SetClusterDefaults again: %v", err)
			}
			if diff := cmp.Diff(got, again, equateQuantities); diff != "" {
				t.Errorf("defaulting twice changed the spec again (-first +second):\n%s", diff)
			}
		})
	}
}

// TestSetClusterDefaultsRefuses: a setting that cannot be applied is an
// error naming its field, and the spec is left as it was.
func TestSetClusterDefaultsRefuses(t *testing.T) {
	no := false
	tests := []struct {
		name string
		cfg  v1.KubeVirtConfiguration
		want string
	}{
		{"unknown binding", v1.KubeVirtConfiguration{Network: &v1.NetworkConfiguration{DefaultNetworkInterface: "passt"}},
			`spec.configuration.network.defaultNetworkInterface: "passt" is not bridge, masquerade or slirp`},
		{"bridge not permitted", v1.KubeVirtConfiguration{Network: &v1.NetworkConfiguration{PermitBridgeInterfaceOnPodNetwork: &no}},
			"spec.configuration.network.defaultNetworkInterface: bridge is not permitted on the pod network (network.permitBridgeInterfaceOnPodNetwork is false)"},
		{"slirp not permitted", v1.KubeVirtConfiguration{Network: &v1.NetworkConfiguration{DefaultNetworkInterface: "slirp"}},
			"spec.configuration.network.defaultNetworkInterface: slirp is not permitted (network.permitSlirpInterface is not true)"},
		{"negative overcommit", v1.KubeVirtConfiguration{DeveloperConfiguration: &v1.DeveloperConfiguration{MemoryOvercommit: -5}},
			"spec.configuration.developerConfiguration.memoryOvercommit: -5 is not a percentage above 0"},
		{"cpuRequest of zero", v1.KubeVirtConfiguration{CPURequest: qtyPtr("0")},
			"spec.configuration.cpuRequest: 0 is not a CPU quantity above 0"},
		{"negative cpuRequest", v1.KubeVirtConfiguration{CPURequest: qtyPtr("-1")},
			"spec.configuration.cpuRequest: -1 is not a CPU quantity above 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guest := qty("1Gi")
			in := v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &guest}}}
			spec := in.DeepCopy()
			err := v1.SetClusterDefaults(spec, &tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("SetClusterDefaults = %v, want %q", err, tt.want)
			}
			if diff := cmp.Diff(&in, spec, equateQuantities); diff != "" {
				t.Errorf("a refused configuration changed the spec:\n%s", diff)
			}
		})
	}
}

// TestSetClusterDefaultsChecksOnlyWhatIsUsed: as in KubeVirt, a binding the
// cluster forbids matters only to a guest that would get the default
// interface, an overcommit only to a guest whose memory request it would
// set, and a cpuRequest only to a guest whose CPU request it would set.
func TestSetClusterDefaultsChecksOnlyWhatIsUsed(t *testing.T) {
	no := false
	cfg := &v1.KubeVirtConfiguration{
		Network:                &v1.NetworkConfiguration{PermitBridgeInterfaceOnPodNetwork: &no},
		DeveloperConfiguration: &v1.DeveloperConfiguration{MemoryOvercommit: -5},
		CPURequest:             qtyPtr("-1"),
	}
	guest := qty("1Gi")
	spec := &v1.VirtualMachineInstanceSpec{
		Domain: v1.DomainSpec{
			Memory:    &v1.Memory{Guest: &guest},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: qty("1Gi"), corev1.ResourceCPU: qty("1")}},
			Devices:   v1.Devices{Interfaces: []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}},
		},
		Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
	}
	if err := v1.SetClusterDefaults(spec, cfg); err != nil {
		t.Fatalf("a guest with its own interface and request: %v", err)
	}
	if spec.Domain.Machine == nil || spec.Domain.Machine.Type != "q35" {
		t.Errorf("machine %+v: the other defaults must still be applied", spec.Domain.Machine)
	}
	dedicated := &v1.CPU{DedicatedCPUPlacement: true}
	if err := v1.SetClusterDefaults(&v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: dedicated, Devices: v1.Devices{AutoattachPodInterface: &no}}}, cfg); err != nil {
		t.Errorf("a guest with dedicated vCPUs and autoattachPodInterface false: %v", err)
	}
}
