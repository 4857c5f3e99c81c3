package podtemplate

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestLauncherArgs(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm", "ns", "uid-1"
	tests := []struct {
		name  string
		cfg   func(*Config)
		grace int64
		want  string
	}{
		{"defaults", nil, 30,
			"--qemu-timeout 240s --name vm --uid uid-1 --namespace ns --kubevirt-share-dir /var/run/kubevirt " +
				"--ephemeral-disk-dir /var/run/kubevirt-ephemeral-disks --container-disk-dir /var/run/kubevirt/container-disks " +
				"--grace-period-seconds 45 --hook-sidecars 0 --less-pvc-space-toleration 10 --ovmf-path /usr/share/OVMF"},
		{"configured, with emulation and ExpandDisks", func(c *Config) {
			c.QEMUTimeout = 5 * time.Minute
			c.ShareDir, c.EphemeralDiskDir, c.ContainerDiskDir, c.OVMFPath = "/run/vmkit", "/run/vmkit-eph", "/run/vmkit/cd", "/usr/share/edk2"
			c.LessPVCSpaceToleration = 3
			c.EmulationAllowed = true
			c.FeatureGates = []string{ExpandDisksGate}
		}, 0,
			"--qemu-timeout 300s --name vm --uid uid-1 --namespace ns --kubevirt-share-dir /run/vmkit " +
				"--ephemeral-disk-dir /run/vmkit-eph --container-disk-dir /run/vmkit/cd " +
				"--grace-period-seconds 15 --hook-sidecars 0 --less-pvc-space-toleration 3 --ovmf-path /usr/share/edk2 --use-emulation --expand-disks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRenderer(t, tt.cfg)
			got := strings.Join(r.launcherArgs(vmi, &guestFacts{graceSeconds: tt.grace}), " ")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLauncherGracePeriods(t *testing.T) {
	for guest, want := range map[int64][2]int64{0: {15, 30}, 30: {45, 60}, 120: {135, 150}} {
		l, p := launcherGracePeriods(guest)
		if l != want[0] || p != want[1] {
			t.Errorf("guest grace %d: launcher %d, pod %d; want %v", guest, l, p, want)
		}
		if p <= l {
			t.Error("the kubelet must wait longer than the launcher")
		}
	}
}

func TestDiskContainers(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{}
	vmi.UID = "u1"
	vmi.Spec.Volumes = []v1.Volume{
		{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "x"}}},
		{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img-a", ImagePullPolicy: corev1.PullAlways}}},
		{Name: "extra", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img-b"}}},
	}
	vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "kernel-img"}}}
	r := newTestRenderer(t, nil)

	type summary struct {
		Name, Image string
		Policy      corev1.PullPolicy
		Cmd         string
		Mounts      string
	}
	sum := func(cs []corev1.Container) []summary {
		var out []summary
		for _, c := range cs {
			var mounts []string
			for _, m := range c.VolumeMounts {
				mounts = append(mounts, m.Name+":"+m.MountPath)
			}
			out = append(out, summary{c.Name, c.Image, c.ImagePullPolicy, strings.Join(append(c.Command, c.Args...), " "), strings.Join(mounts, ",")})
		}
		return out
	}
	const diskMounts = "container-disks:/var/run/kubevirt/container-disks/u1,virt-bin-share-dir:/usr/bin"
	inits, sidecars := r.diskContainers(vmi, &guestFacts{containerDisks: 2, kernelBoot: true}, resource.MustParse("100m"), nil)
	wantInits := []summary{
		{"container-disk-binary", "quay.io/kubevirt/virt-launcher:v1.5.0", corev1.PullIfNotPresent,
			"/usr/bin/cp --preserve=all /usr/bin/container-disk /init/usr/bin/container-disk", "virt-bin-share-dir:/init/usr/bin"},
		{"volumeroot-init", "img-a", corev1.PullAlways, "/usr/bin/container-disk --no-op", diskMounts},
		{"volumeextra-init", "img-b", "", "/usr/bin/container-disk --no-op", diskMounts},
		{"volumekernel-boot-volume-init", "kernel-img", "", "/usr/bin/container-disk --no-op", diskMounts},
	}
	// disk_<n>: n is the volume's index in spec.volumes, as KubeVirt counts.
	wantSidecars := []summary{
		{"volumeroot", "img-a", corev1.PullAlways, "/usr/bin/container-disk --copy-path /var/run/kubevirt/container-disks/u1/disk_1", diskMounts},
		{"volumeextra", "img-b", "", "/usr/bin/container-disk --copy-path /var/run/kubevirt/container-disks/u1/disk_2", diskMounts},
		{"volumekernel-boot-volume", "kernel-img", "", "/usr/bin/container-disk --copy-path /var/run/kubevirt/container-disks/u1/kernel-boot", diskMounts},
	}
	if diff := cmp.Diff(wantInits, sum(inits)); diff != "" {
		t.Errorf("init containers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSidecars, sum(sidecars)); diff != "" {
		t.Errorf("sidecars (-want +got):\n%s", diff)
	}
	// Appending to one container's mounts must not overwrite its
	// neighbour's.
	inits[1].VolumeMounts = append(inits[1].VolumeMounts, corev1.VolumeMount{Name: "intruder"})
	if diff := cmp.Diff(wantSidecars, sum(sidecars)); diff != "" {
		t.Errorf("appending to one container's mounts changed another's:\n%s", diff)
	}

	if inits, sidecars := r.diskContainers(&v1.VirtualMachineInstance{}, &guestFacts{}, resource.Quantity{}, nil); inits != nil || sidecars != nil {
		t.Errorf("a VMI without container disks got helpers: %v %v", inits, sidecars)
	}

	// A Guaranteed pod: the images' init containers copy them in, with
	// the compute container's CPU; the sidecars keep KubeVirt's 10m.
	inits, sidecars = r.diskContainers(vmi, &guestFacts{containerDisks: 2, kernelBoot: true, dedicated: true}, resource.MustParse("2"), nil)
	wantInits[1].Cmd = "/usr/bin/container-disk --copy-path /var/run/kubevirt/container-disks/u1/disk_1 --copy-only"
	wantInits[2].Cmd = "/usr/bin/container-disk --copy-path /var/run/kubevirt/container-disks/u1/disk_2 --copy-only"
	wantInits[3].Cmd = "/usr/bin/container-disk --copy-path /var/run/kubevirt/container-disks/u1/kernel-boot --copy-only"
	if diff := cmp.Diff(wantInits, sum(inits)); diff != "" {
		t.Errorf("a Guaranteed pod's init containers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSidecars, sum(sidecars)); diff != "" {
		t.Errorf("a Guaranteed pod's sidecars (-want +got):\n%s", diff)
	}
	cpu := func(c corev1.Container) string {
		return c.Resources.Requests.Cpu().String() + "/" + c.Resources.Limits.Cpu().String()
	}
	for i, want := range []string{"10m/10m", "2/2", "2/2", "2/2"} {
		if got := cpu(inits[i]); got != want {
			t.Errorf("init container %s: CPU request/limit %s, want %s", inits[i].Name, got, want)
		}
	}
	for _, c := range sidecars {
		if got := cpu(c); got != "10m/10m" {
			t.Errorf("sidecar %s: CPU request/limit %s, want KubeVirt's 10m/10m", c.Name, got)
		}
	}
}

func TestContainerPorts(t *testing.T) {
	ifaces := []v1.Interface{
		{Name: "default", Ports: []v1.Port{{Name: "http", Port: 80}, {Port: 53, Protocol: "UDP"}}},
		{Name: "blue"},
		{Name: "green", Ports: []v1.Port{{Name: "ssh", Port: 22, Protocol: "TCP"}}},
	}
	want := []corev1.ContainerPort{
		{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP},
		{ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "ssh", ContainerPort: 22, Protocol: corev1.ProtocolTCP},
	}
	if diff := cmp.Diff(want, containerPorts(ifaces)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := containerPorts(ifaces[1:2]); got != nil {
		t.Errorf("no ports: %v", got)
	}
}

func TestImagePullSecrets(t *testing.T) {
	r := newTestRenderer(t, func(c *Config) { c.ImagePullSecrets = []string{"cluster", "shared"} })
	spec := &v1.VirtualMachineInstanceSpec{
		Volumes: []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "i", ImagePullSecret: "shared"}}},
			{Name: "b", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "i"}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "i", ImagePullSecret: "disk"}}},
		},
		Domain: v1.DomainSpec{Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "k", ImagePullSecret: "kernel"}}}},
	}
	want := []corev1.LocalObjectReference{{Name: "shared"}, {Name: "disk"}, {Name: "kernel"}, {Name: "cluster"}}
	if diff := cmp.Diff(want, r.imagePullSecrets(spec)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
