package podtemplate

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// minimalVMI is a valid VMI the error cases break one field at a time.
func minimalVMI() *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm", "ns", "u1"
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}
	vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	vmi.Spec.Volumes = []v1.Volume{
		{Name: "a", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
		{Name: "b", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: q("1Gi")}}},
		{Name: "c", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
	}
	return vmi
}

func TestRenderLaunchPodErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*v1.VirtualMachineInstance)
		want string
	}{
		{"disk without volume", func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Devices.Disks[2].Name = "x" },
			`VirtualMachineInstance ns/vm: spec.domain.devices.disks[2]: volume "x" not found in spec.volumes`},
		{"interface without network", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default"}}
		}, `VirtualMachineInstance ns/vm: spec.domain.devices.interfaces[0]: network "default" not found in spec.networks`},
		{"unsupported volume", func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Volumes[1].EmptyDisk = nil },
			`VirtualMachineInstance ns/vm: spec.volumes[1]: volume "b" sets 0 sources`},
		{"no memory", func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Resources.Requests = nil },
			"VirtualMachineInstance ns/vm: spec.domain.resources.requests.memory: required"},
		{"zero guest memory", func(vmi *v1.VirtualMachineInstance) {
			zero := q("0")
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: &zero}
		}, "VirtualMachineInstance ns/vm: spec.domain.memory.guest: 0 must be more than 0"},
		{"absurd memory", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = q("1Ei")
		}, "VirtualMachineInstance ns/vm: spec.domain.resources.requests.memory: 1Ei must be more than 0 and at most 64Ti"},
		{"too many vCPUs", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 64, Cores: 64, Threads: 64}
		}, "VirtualMachineInstance ns/vm: spec.domain.cpu: sockets × cores × threads exceeds 4096 vCPUs"},
		{"huge page size", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Hugepages: &v1.Hugepages{PageSize: "big"}}
		}, `VirtualMachineInstance ns/vm: spec.domain.memory.hugepages.pageSize: "big" is not a quantity`},
		{"memory not in whole huge pages", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = q("1G")
			vmi.Spec.Domain.Memory = &v1.Memory{Hugepages: &v1.Hugepages{PageSize: "2Mi"}}
		}, "VirtualMachineInstance ns/vm: spec.domain.memory.hugepages.pageSize: the guest memory (1000000000 bytes) is not a multiple of the page size 2Mi"},
		{"negative grace period", func(vmi *v1.VirtualMachineInstance) {
			g := int64(-1)
			vmi.Spec.TerminationGracePeriodSeconds = &g
		}, "VirtualMachineInstance ns/vm: spec.terminationGracePeriodSeconds: -1 must not be negative"},
		{"kernel boot without image", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{}}}
		}, "VirtualMachineInstance ns/vm: spec.domain.firmware.kernelBoot.container.image: required"},
		{"bad port", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", Ports: []v1.Port{{Name: "way-too-long-port-name", Port: 80}}}}
			vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
		}, `VirtualMachineInstance ns/vm: spec.domain.devices.interfaces[0].ports[0].name: "way-too-long-port-name" is not a valid port name`},
		{"bad subdomain", func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Subdomain = "a.b" },
			`VirtualMachineInstance ns/vm: spec.subdomain: "a.b": must not contain dots`},
		{"too many volumes", func(vmi *v1.VirtualMachineInstance) {
			for i := range 300 {
				vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "v" + strconv.Itoa(i)})
			}
		}, "VirtualMachineInstance ns/vm: spec.volumes: 303 entries, more than the 256 allowed"},
		{"no uid", func(vmi *v1.VirtualMachineInstance) { vmi.UID = "" },
			"VirtualMachineInstance ns/vm: metadata.uid: required"},
		{"no namespace", func(vmi *v1.VirtualMachineInstance) { vmi.Namespace = "" },
			`VirtualMachineInstance /vm: metadata.namespace: ""`},
	}
	r := newTestRenderer(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := minimalVMI()
			if _, err := r.RenderLaunchPod(vmi); err != nil {
				t.Fatalf("the unbroken VMI does not render: %v", err)
			}
			tt.edit(vmi)
			pod, err := r.RenderLaunchPod(vmi)
			if pod != nil {
				t.Error("a pod came back with the error")
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v\nwant a FieldError starting with %q", err, tt.want)
			}
		})
	}
	if _, err := r.RenderLaunchPod(nil); err == nil {
		t.Error("a nil VMI renders")
	}
}

func TestRenderLaunchPodAppliesConfig(t *testing.T) {
	r := newTestRenderer(t, func(c *Config) {
		c.ExtraLabels = map[string]string{"example.com/team": "vms"}
		c.ExtraAnnotations = map[string]string{"example.com/audit": "on"}
		c.ImagePullPolicy = corev1.PullAlways
		c.TerminationGracePeriodSeconds = 100
	})
	vmi := minimalVMI()
	vmi.Spec.SchedulerName = "vm-scheduler"
	vmi.Spec.DNSPolicy = corev1.DNSNone
	vmi.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
	vmi.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway}}
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "sa", VolumeSource: v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "agent"}}})
	pod, err := r.RenderLaunchPod(vmi)
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Team, Audit, Scheduler, SA string
		Automount                  bool
		Grace                      int64
		Pull                       corev1.PullPolicy
		DNS                        corev1.DNSPolicy
		Nameservers                []string
		Spread                     int
	}
	got := view{
		pod.Labels["example.com/team"], pod.Annotations["example.com/audit"], pod.Spec.SchedulerName, pod.Spec.ServiceAccountName,
		*pod.Spec.AutomountServiceAccountToken, *pod.Spec.TerminationGracePeriodSeconds, pod.Spec.Containers[0].ImagePullPolicy,
		pod.Spec.DNSPolicy, pod.Spec.DNSConfig.Nameservers, len(pod.Spec.TopologySpreadConstraints),
	}
	want := view{"vms", "on", "vm-scheduler", "agent", true, 130, corev1.PullAlways, corev1.DNSNone, []string{"10.0.0.10"}, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRenderMigrationTargetPod(t *testing.T) {
	r := newTestRenderer(t, nil)
	vmi := minimalVMI()
	vmi.Status.NodeName = "node-a"
	migration := &v1.VirtualMachineInstanceMigration{}
	migration.Name, migration.Namespace, migration.UID, migration.Spec.VMIName = "mig", "ns", "m1", "vm"

	pod, err := r.RenderMigrationTargetPod(vmi, migration)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[v1.MigrationJobLabel] != "m1" || pod.Annotations["kubevirt.io/migrationJobName"] != "mig" {
		t.Errorf("migration label/annotation missing: %v %v", pod.Labels, pod.Annotations)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "node-a" || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpNotIn {
		t.Errorf("not kept off the source node: %+v", terms)
	}
	launch, _ := r.RenderLaunchPod(vmi)
	if launch.Spec.Affinity != nil || launch.Labels[v1.MigrationJobLabel] != "" {
		t.Error("the launch pod carries migration placement")
	}
	// Apart from labels, annotations and affinity the pods are the same.
	pod.Labels, pod.Annotations, pod.Spec.Affinity = launch.Labels, launch.Annotations, nil
	if diff := cmp.Diff(launch, pod); diff != "" {
		t.Errorf("target pod differs from the launch pod beyond placement:\n%s", diff)
	}

	for name, tt := range map[string]struct {
		edit func(*v1.VirtualMachineInstanceMigration)
		want string
	}{
		"other VMI":       {func(m *v1.VirtualMachineInstanceMigration) { m.Spec.VMIName = "other" }, `VirtualMachineInstanceMigration ns/mig: spec.vmiName: "other" does not name VirtualMachineInstance ns/vm`},
		"other namespace": {func(m *v1.VirtualMachineInstanceMigration) { m.Namespace = "ns2" }, `VirtualMachineInstanceMigration ns2/mig: spec.vmiName: "vm" does not name VirtualMachineInstance ns/vm`},
		"no uid":          {func(m *v1.VirtualMachineInstanceMigration) { m.UID = "" }, "VirtualMachineInstanceMigration ns/mig: metadata.uid: required"},
	} {
		m := migration.DeepCopy()
		tt.edit(m)
		if _, err := r.RenderMigrationTargetPod(vmi, m); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", name, err, tt.want)
		}
	}
	if _, err := r.RenderMigrationTargetPod(vmi, nil); err == nil {
		t.Error("a nil migration renders")
	}
}
