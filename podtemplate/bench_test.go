package podtemplate

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// benchVMI returns the benchmark VMIs. small is the VMI KubeVirt's
// RenderLaunchManifest is measured with (a container disk and cloud-init);
// medium adds PVCs, a Secret and two NICs; large has 16 disks of mixed
// kinds, four NICs, dedicated CPUs and placement rules.
func benchVMI(size string) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "bench", "default", "5f4e3d2c-1b0a-4987-8654-3210fedcba98"
	vmi.Labels = map[string]string{"app": "bench"}
	d := &vmi.Spec.Domain
	d.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	addDisk := func(name string, src v1.VolumeSource) {
		d.Devices.Disks = append(d.Devices.Disks, v1.Disk{Name: name})
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: name, VolumeSource: src})
	}
	addNIC := func(name string, pod bool) {
		iface := v1.Interface{Name: name, InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}
		net := v1.Network{Name: name, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: name}}}
		if pod {
			iface.InterfaceBindingMethod = v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
			net.NetworkSource = v1.NetworkSource{Pod: &v1.PodNetwork{}}
		}
		d.Devices.Interfaces = append(d.Devices.Interfaces, iface)
		vmi.Spec.Networks = append(vmi.Spec.Networks, net)
	}
	addDisk("root", v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:40"}})
	addDisk("cloudinit", v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}})
	if size == "small" {
		return vmi
	}
	d.CPU = &v1.CPU{Cores: 4}
	addNIC("default", true)
	addNIC("blue", false)
	addDisk("data", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "bench-data"}}})
	addDisk("logs", v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "bench-logs"}})
	addDisk("creds", v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "bench-creds"}})
	if size == "medium" {
		return vmi
	}
	d.CPU.DedicatedCPUPlacement = true
	addNIC("green", false)
	addNIC("red", false)
	for i := range 11 {
		n := strconv.Itoa(i)
		switch i % 4 {
		case 0:
			addDisk("cd"+n, v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "example.com/disk:" + n}})
		case 1:
			addDisk("pvc"+n, v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + n}}})
		case 2:
			addDisk("cm"+n, v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-" + n}}})
		case 3:
			addDisk("empty"+n, v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}})
		}
	}
	vmi.Spec.NodeSelector = map[string]string{"example.com/zone": "a"}
	vmi.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/vms", Operator: corev1.TolerationOpExists}}
	vmi.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}},
		}}},
	}}
	return vmi
}

// BenchmarkRenderLaunchPod measures RenderLaunchPod; the numbers go to
// docs/performance.md (go test ./podtemplate -run '^$' -bench . -benchmem).
// Besides wall time it reports cpu-ns/op, the process's CPU time per render
// (garbage collection on other cores included), which other load on a
// shared machine distorts much less than wall time.
func BenchmarkRenderLaunchPod(b *testing.B) {
	r := newTestRenderer(b, func(c *Config) { c.ClaimVolumeMode = nil })
	for _, size := range []string{"small", "medium", "large"} {
		vmi := benchVMI(size)
		if _, err := r.RenderLaunchPod(vmi); err != nil {
			b.Fatal(err)
		}
		b.Run(size, func(b *testing.B) {
			b.ReportAllocs()
			cpu0, ok := processCPUTime()
			n := 0
			for b.Loop() {
				if _, err := r.RenderLaunchPod(vmi); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if cpu1, _ := processCPUTime(); ok && n > 0 {
				b.ReportMetric(float64(cpu1-cpu0)/float64(n), "cpu-ns/op")
			}
		})
	}
}
