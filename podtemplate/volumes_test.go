package podtemplate

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func blockClaims(_, claim string) (corev1.PersistentVolumeMode, error) {
	if strings.HasPrefix(claim, "block-") {
		return corev1.PersistentVolumeBlock, nil
	}
	return corev1.PersistentVolumeFilesystem, nil
}

func TestVMIStorage(t *testing.T) {
	yes := true
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	tests := []struct {
		name string
		vol  v1.VolumeSource
		want podStorage
	}{{
		name: "filesystem PVC",
		vol: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c", ReadOnly: true}}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c", ReadOnly: true}}}},
			mounts:  []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/kubevirt-private/vmi-disks/x"}},
		},
	}, {
		name: "block PVC becomes a device",
		vol: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "block-c"}}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "block-c"}}}},
			devices: []corev1.VolumeDevice{{Name: "x", DevicePath: "/dev/x"}},
		},
	}, {
		name: "hotplugged PVC is left to the node agent",
		vol: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}, Hotpluggable: true}},
		want: podStorage{},
	}, {
		name: "DataVolume is its claim",
		vol:  v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "dv"}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "dv"}}}},
			mounts:  []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/kubevirt-private/vmi-disks/x"}},
		},
	}, {
		name: "host disk mounts its directory (HostDisk gate on)",
		vol:  v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data/vms/x.img", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: q("1Gi")}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/vms", Type: &dirOrCreate}}}},
			mounts:  []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/kubevirt-private/vmi-disks/x"}},
		},
	}, {
		name: "ConfigMap, read-only",
		vol:  v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Optional: &yes}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Optional: &yes}}}},
			mounts:  []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/kubevirt-private/config-map/x", ReadOnly: true}},
		},
	}, {
		name: "Secret, read-only",
		vol:  v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}},
			mounts:  []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/kubevirt-private/secret/x", ReadOnly: true}},
		},
	}, {
		name: "sysprep from a Secret",
		vol:  v1.VolumeSource{Sysprep: &v1.SysprepSource{Secret: &corev1.LocalObjectReference{Name: "answers"}}},
		want: podStorage{
			volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "answers"}}}},
			mounts:  []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/kubevirt-private/sysprep/x", ReadOnly: true}},
		},
	}, {
		name: "service account: no volume, the pod's account",
		vol:  v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "agent"}},
		want: podStorage{serviceAccount: "agent"},
	}, {
		name: "cloud-init user and network data Secrets under both key spellings",
		vol: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{
			UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "nd"}}},
		want: podStorage{
			volumes: []corev1.Volume{
				{Name: "x-udata", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "ud"}}},
				{Name: "x-ndata", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nd"}}},
			},
			mounts: []corev1.VolumeMount{
				{Name: "x-udata", MountPath: "/var/run/kubevirt-private/secret/x/userdata", SubPath: "userdata", ReadOnly: true},
				{Name: "x-udata", MountPath: "/var/run/kubevirt-private/secret/x/userData", SubPath: "userData", ReadOnly: true},
				{Name: "x-ndata", MountPath: "/var/run/kubevirt-private/secret/x/networkdata", SubPath: "networkdata", ReadOnly: true},
				{Name: "x-ndata", MountPath: "/var/run/kubevirt-private/secret/x/networkData", SubPath: "networkData", ReadOnly: true},
			},
		},
	}, {
		name: "inline cloud-init needs no pod volume",
		vol:  v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{UserData: "#cloud-config"}},
		want: podStorage{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
			spec := &v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "x", VolumeSource: tt.vol}}}
			var got podStorage
			cfg := &Config{ClaimVolumeMode: blockClaims, FeatureGates: []string{HostDiskGate}}
			if err := vmiStorage(f, spec, "ns", cfg, &got); err != nil {
				t.Fatal(err)
			}
			if v, m := storageCounts(spec); len(got.volumes) > v || len(got.mounts)+len(got.devices) > m {
				t.Errorf("storageCounts says %d volumes and %d mounts, too few for %+v", v, m, got)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(podStorage{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestVMIStorageErrors(t *testing.T) {
	pvc := func(claim string) v1.VolumeSource {
		return v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
	cd := v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}
	tests := []struct {
		name string
		vols []v1.Volume
		want string
	}{
		{"no source", []v1.Volume{{Name: "a"}}, `spec.volumes[0]: volume "a" sets 0 sources; it must set exactly one of`},
		{"two sources", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{ContainerDisk: cd.ContainerDisk, EmptyDisk: &v1.EmptyDiskSource{Capacity: q("1Gi")}}}},
			`spec.volumes[0]: volume "a" sets 2 sources`},
		{"bad name", []v1.Volume{{Name: "Data_1", VolumeSource: cd}}, `spec.volumes[0].name: "Data_1": a lowercase RFC 1123 label`},
		{"duplicate name", []v1.Volume{{Name: "a", VolumeSource: cd}, {Name: "a", VolumeSource: cd}}, `spec.volumes[1].name: "a" is also the name of spec.volumes[0]`},
		{"reserved name", []v1.Volume{{Name: "sockets", VolumeSource: pvc("c")}}, `spec.volumes[0].name: "sockets" is the name of one of the launcher pod's own volumes`},
		{"derived name collision", []v1.Volume{
			{Name: "ci", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}}}},
			{Name: "ci-udata", VolumeSource: pvc("c")}}, `spec.volumes[1].name: "ci-udata" is also the pod volume of another volume's secret`},
		{"claim name", []v1.Volume{{Name: "a", VolumeSource: pvc("")}}, "spec.volumes[0].persistentVolumeClaim.claimName: required"},
		{"bad claim name", []v1.Volume{{Name: "a", VolumeSource: pvc("Bad")}}, `spec.volumes[0].persistentVolumeClaim: claim name "Bad"`},
		{"host disk at the root", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/a.img", Type: v1.HostDiskExists}}}},
			`spec.volumes[0].hostDisk.path: "/a.img": the image must be in a directory other than /`},
		{"relative host disk", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "d/a.img", Type: v1.HostDiskExists}}}},
			`spec.volumes[0].hostDisk.path: "d/a.img" must be a clean absolute path`},
		{"host disk type", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/d/a.img", Type: "Block"}}}},
			`spec.volumes[0].hostDisk.type: "Block" is not Disk or DiskOrCreate`},
		{"host disk capacity", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/d/a.img", Type: v1.HostDiskExistsOrCreateEmpty}}}},
			`spec.volumes[0].hostDisk.capacity: required for type DiskOrCreate`},
		{"sysprep without source", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{Sysprep: &v1.SysprepSource{}}}},
			`spec.volumes[0].sysprep: needs the name of a secret or a configMap`},
		{"two service accounts", []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "x"}}},
			{Name: "b", VolumeSource: v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "y"}}}},
			`spec.volumes[1].serviceAccount: a second service account ("y" after "x")`},
		{"container disk without image", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{}}}},
			"spec.volumes[0].containerDisk.image: required"},
		{"container disk name too long", []v1.Volume{{Name: strings.Repeat("a", 53), VolumeSource: cd}},
			"spec.volumes[0].name: \"" + strings.Repeat("a", 53) + "\" is too long for a containerDisk"},
		{"empty disk capacity", []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{}}}},
			"spec.volumes[0].emptyDisk.capacity: 0 must be more than 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
			cfg := &Config{FeatureGates: []string{HostDiskGate}} // the host disk cases check the fields
			err := vmiStorage(f, &v1.VirtualMachineInstanceSpec{Volumes: tt.vols}, "ns", cfg, &podStorage{})
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "VirtualMachineInstance ns/vm: "+tt.want) {
				t.Errorf("error %v\nwant a FieldError starting with %q", err, "VirtualMachineInstance ns/vm: "+tt.want)
			}
		})
	}
}

// TestHostDiskDeniedPaths (#35, N8): with the HostDisk gate on, a hostDisk
// whose directory is, is under, or contains a system directory of the node
// (/etc, /var/lib/kubelet, …) renders no pod, and the error names the VMI
// and spec.volumes[i].hostDisk.path; a directory of its own renders.
func TestHostDiskDeniedPaths(t *testing.T) {
	tests := []struct {
		path   string
		denied string // "" when allowed
	}{
		{"/etc/x.img", "/etc"},
		{"/etc/ld.so.preload", "/etc"},
		{"/etc/kubernetes/pki/x.img", "/etc"},
		{"/root/.ssh/authorized_keys", "/root"},
		{"/usr/local/bin/x", "/usr"},
		{"/boot/x.img", "/boot"},
		{"/bin/x", "/bin"},
		{"/sbin/x", "/sbin"},
		{"/lib/x.img", "/lib"},
		{"/lib64/x.img", "/lib64"},
		{"/libx32/x.img", "/libx32"},
		{"/var/lib/kubelet/x.img", "/var/lib/kubelet"},
		{"/var/lib/kubelet/pods/u/volumes/x.img", "/var/lib/kubelet"},
		{"/var/run/x.img", "/var/run"},
		{"/run/containerd/x.img", "/run"},
		{"/proc/1/root/x", "/proc"},
		{"/sys/kernel/x", "/sys"},
		{"/dev/sda", "/dev"},
		{"/home/admin/.ssh/x", "/home"},
		{"/opt/cni/bin/bridge", "/opt"},
		{"/var/lib/containerd/x.img", "/var/lib/containerd"},
		{"/var/spool/cron/crontabs/root", "/var/spool"},
		// A directory above a denied one would mount it too.
		{"/var/x.img", "/var/lib/kubelet"},
		{"/var/lib/x.img", "/var/lib/kubelet"},
		// Directories of their own.
		{"/data/x.img", ""},
		{"/data/etc/x.img", ""},
		{"/var/lib/vm-disks/x.img", ""},
		{"/var/lib/libvirt/images/x.qcow2", ""},
		{"/var/lib/kubelet-images/x.img", ""},
		{"/mnt/disks/x.img", ""},
		{"/tmp/hostImages/x.img", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := DeniedHostDiskPath(tt.path); got != tt.denied {
				t.Errorf("DeniedHostDiskPath(%q) = %q, want %q", tt.path, got, tt.denied)
			}
			for _, typ := range []v1.HostDiskType{v1.HostDiskExists, v1.HostDiskExistsOrCreateEmpty} {
				vols := []v1.Volume{
					{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
					{Name: "data", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: tt.path, Type: typ, Capacity: q("1Gi")}}},
				}
				f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
				var got podStorage
				err := vmiStorage(f, &v1.VirtualMachineInstanceSpec{Volumes: vols}, "ns", &Config{FeatureGates: []string{HostDiskGate}}, &got)
				if tt.denied == "" {
					if err != nil {
						t.Errorf("%s: %v", typ, err)
					}
					continue
				}
				want := fmt.Sprintf(`VirtualMachineInstance ns/vm: spec.volumes[1].hostDisk.path: %q: its directory %s would mount %s of the node into the launcher pod, read-write;`,
					tt.path, path.Dir(tt.path), tt.denied)
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "spec.volumes[1].hostDisk.path" || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("%s: error %v\nwant a FieldError starting with %s", typ, err, want)
				}
				if len(got.volumes) != 0 {
					t.Errorf("%s: volumes %v added for a denied host disk", typ, got.volumes)
				}
			}
		})
	}
}

// A hostDisk volume mounts a directory of the node read-write: only with
// the HostDisk feature gate, as in KubeVirt.
func TestHostDiskGate(t *testing.T) {
	vols := []v1.Volume{
		{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
		{Name: "data", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data/vms/x.img", Type: v1.HostDiskExists}}},
	}
	dir := corev1.HostPathDirectory
	hostPath := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/vms", Type: &dir}}}
	const gateOff = "VirtualMachineInstance ns/vm: spec.volumes[1].hostDisk: the HostDisk feature gate is not enabled (KubeVirt CR spec.configuration.developerConfiguration.featureGates)"
	tests := []struct {
		name    string
		gates   []string
		wantErr string
	}{
		{"no gates", nil, gateOff},
		{"other gates", []string{"Snapshot", "hostdisk"}, gateOff},
		{"HostDisk", []string{"Snapshot", HostDiskGate}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
			var got podStorage
			err := vmiStorage(f, &v1.VirtualMachineInstanceSpec{Volumes: vols}, "ns", &Config{FeatureGates: tt.gates}, &got)
			var fe *FieldError
			switch {
			case tt.wantErr != "":
				if !errors.As(err, &fe) || fe.Field != "spec.volumes[1].hostDisk" || err.Error() != tt.wantErr {
					t.Errorf("error %v\nwant a FieldError %s", err, tt.wantErr)
				}
				for _, v := range got.volumes {
					if v.HostPath != nil {
						t.Errorf("hostPath volume %q added though the gate is off", v.Name)
					}
				}
			case err != nil:
				t.Fatal(err)
			default:
				if diff := cmp.Diff([]corev1.Volume{hostPath}, got.volumes); diff != "" {
					t.Errorf("volumes (-want +got):\n%s", diff)
				}
			}
		})
	}

	// Through the Renderer: the golden VMI with a host disk renders no pod
	// without the gate, and the pod with the hostPath volume with it.
	vmi := &v1.VirtualMachineInstance{}
	readObject(t, "storage-kinds.vmi.yaml", vmi)
	pod, err := newTestRenderer(t, nil).RenderLaunchPod(vmi)
	if want := "VirtualMachineInstance default/storage: spec.volumes[2].hostDisk: the HostDisk feature gate is not enabled"; err == nil || !strings.HasPrefix(err.Error(), want) || pod != nil {
		t.Errorf("without the gate: pod %v, error %v; want no pod and an error starting with %q", pod != nil, err, want)
	}
	pod, err = newTestRenderer(t, func(c *Config) { c.FeatureGates = []string{HostDiskGate} }).RenderLaunchPod(vmi)
	if err != nil {
		t.Fatalf("with the gate: %v", err)
	}
	var paths []string
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			paths = append(paths, v.Name+":"+v.HostPath.Path)
		}
	}
	if diff := cmp.Diff([]string{"host:/var/lib/vm-disks"}, paths); diff != "" {
		t.Errorf("with the gate, hostPath volumes (-want +got):\n%s", diff)
	}
}

func TestVMIStorageClaimLookupError(t *testing.T) {
	notFound := errors.New(`persistentvolumeclaim "c" not found`)
	f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
	spec := &v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "c"}}}}}
	var asked string
	err := vmiStorage(f, spec, "ns", &Config{ClaimVolumeMode: func(ns, claim string) (corev1.PersistentVolumeMode, error) {
		asked = ns + "/" + claim
		return "", notFound
	}}, &podStorage{})
	if asked != "ns/c" {
		t.Errorf("looked up %q, want ns/c", asked)
	}
	if !errors.Is(err, notFound) {
		t.Errorf("error %v does not wrap the lookup's error", err)
	}
	const want = `VirtualMachineInstance ns/vm: spec.volumes[0].dataVolume: volume mode of claim "c": persistentvolumeclaim "c" not found`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

func TestOwnVolumes(t *testing.T) {
	r := newTestRenderer(t, nil)
	names := func(vols []corev1.Volume) []string {
		var out []string
		for _, v := range vols {
			out = append(out, v.Name)
		}
		return out
	}
	base := []string{"private", "public", "sockets", "libvirt-runtime", "ephemeral-disks", "container-disks"}
	tests := []struct {
		name    string
		facts   guestFacts
		noHot   bool
		want    []string
		hotplug bool
	}{
		{"hotplug on by default", guestFacts{}, false, append(base[:6:6], "hotplug-disks"), true},
		{"hotplug off", guestFacts{}, true, base, false},
		{"helpers share the container-disk binary", guestFacts{containerDisks: 1}, true, append(base[:6:6], "virt-bin-share-dir"), false},
		{"huge pages", guestFacts{hugePages: "2Mi"}, true, append(base[:6:6], "hugepages", "hugetblfs-dir"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.VirtualMachineInstanceSpec{}
			spec.Domain.Devices.DisableHotplug = tt.noHot
			vols, mounts := r.ownVolumes(&tt.facts, spec, 3, 4)
			if diff := cmp.Diff(tt.want, names(vols)); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if cap(vols)-len(vols) != 3 || cap(mounts)-len(mounts) != 4 {
				t.Errorf("room for the VMI's volumes and mounts: %d and %d, want 3 and 4", cap(vols)-len(vols), cap(mounts)-len(mounts))
			}
			for _, v := range vols {
				if v.EmptyDir == nil {
					t.Errorf("volume %s is not an emptyDir", v.Name)
				}
			}
			if (vols[len(vols)-1].Name == "hugetblfs-dir") != (tt.facts.hugePages != "") {
				t.Error("huge page volumes")
			}
			var propagated bool
			for _, m := range mounts {
				if m.MountPropagation != nil {
					propagated = m.Name == "hotplug-disks" && *m.MountPropagation == corev1.MountPropagationHostToContainer
				}
			}
			if propagated != tt.hotplug {
				t.Errorf("hotplug-disks mount with HostToContainer propagation: %v, want %v", propagated, tt.hotplug)
			}
		})
	}
}

// A VMI with persistent state (a persistent TPM or EFI variable store)
// renders only with the VMPersistentState feature gate, as in KubeVirt;
// its pod then mounts the VM's backend-storage claim at VMStateDir.
func TestBackendStorage(t *testing.T) {
	on := true
	tests := []struct {
		name    string
		set     func(*v1.VirtualMachineInstanceSpec)
		gates   []string
		wantErr string
	}{
		{"no persistent state", func(*v1.VirtualMachineInstanceSpec) {}, nil, ""},
		{"TPM without persistence", func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Devices.TPM = &v1.TPMDevice{} }, nil, ""},
		{"persistent TPM without the gate", func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Devices.TPM = &v1.TPMDevice{Persistent: &on} },
			[]string{HostDiskGate}, "VirtualMachineInstance ns/vm: spec.domain.devices.tpm.persistent: the VMPersistentState feature gate is not enabled (KubeVirt CR spec.configuration.developerConfiguration.featureGates)"},
		{"persistent EFI without the gate", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{Persistent: &on}}}
		}, nil, "VirtualMachineInstance ns/vm: spec.domain.firmware.bootloader.efi.persistent: the VMPersistentState feature gate is not enabled (KubeVirt CR spec.configuration.developerConfiguration.featureGates)"},
		{"persistent TPM", func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Devices.TPM = &v1.TPMDevice{Persistent: &on} }, []string{VMPersistentStateGate}, ""},
		{"persistent EFI", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{Persistent: &on}}}
		}, []string{VMPersistentStateGate}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
			tt.set(&vmi.Spec)
			f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
			var got podStorage
			err := backendStorage(f, vmi, &Config{FeatureGates: tt.gates}, &got)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || len(got.volumes) != 0 {
					t.Errorf("error %v, %d volumes\nwant no volume and %s", err, len(got.volumes), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want podStorage
			if v1.NeedsBackendStorage(&vmi.Spec) {
				want.volumes = []corev1.Volume{{Name: "vm-state", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "persistent-state-for-vm"}}}}
				want.mounts = []corev1.VolumeMount{{Name: "vm-state", MountPath: "/var/lib/libvirt/vm-state"}}
			}
			if diff := cmp.Diff(want.volumes, got.volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.mounts, got.mounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}
