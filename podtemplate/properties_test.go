package podtemplate

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// checkPodProperties checks what must hold for every launcher pod.
func checkPodProperties(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	if len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].Name != ComputeContainerName {
		t.Fatalf("the first container must be %q", ComputeContainerName)
	}
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if volumes[v.Name] {
			t.Errorf("volume %q appears twice", v.Name)
		}
		volumes[v.Name] = true
	}
	names := map[string]bool{}
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		if names[c.Name] {
			t.Errorf("container name %q appears twice", c.Name)
		}
		names[c.Name] = true
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[res]; !ok || q.Sign() <= 0 {
				t.Errorf("container %s: no %s request", c.Name, res)
			}
		}
		for res, lim := range c.Resources.Limits {
			if req, ok := c.Resources.Requests[res]; ok && req.Cmp(lim) > 0 {
				t.Errorf("container %s: %s request %s exceeds limit %s", c.Name, res, req.String(), lim.String())
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("container %s mounts volume %q, which the pod does not have", c.Name, m.Name)
			}
		}
		for _, d := range c.VolumeDevices {
			if !volumes[d.Name] {
				t.Errorf("container %s attaches volume %q, which the pod does not have", c.Name, d.Name)
			}
		}
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || *sc.Privileged {
			t.Errorf("container %s must say privileged: false", c.Name)
		}
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Error("the pod must not share the node's namespaces")
	}
	if pod.Labels[v1.AppLabel] != v1.VirtLauncherValue || pod.Annotations[v1.DomainAnnotation] == "" {
		t.Errorf("launcher label and domain annotation missing: %v %v", pod.Labels, pod.Annotations)
	}
}

// checkVMIProperties checks what must hold between a VMI and its pod.
func checkVMIProperties(t testing.TB, r *Renderer, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) {
	t.Helper()
	checkPodProperties(t, pod)
	checkHostPaths(t, r, vmi, pod)
	compute := pod.Spec.Containers[0]
	overhead := r.MemoryOverhead(vmi)
	guest, err := guestMemory(objectRef{}, &vmi.Spec)
	if err != nil {
		t.Fatalf("rendered a VMI without valid guest memory: %v", err)
	}
	// Memory for the guest: the memory request, plus huge pages when the
	// guest is backed by them.
	have := compute.Resources.Requests[corev1.ResourceMemory]
	have = have.DeepCopy()
	for name, q := range compute.Resources.Requests {
		if len(name) > len(corev1.ResourceHugePagesPrefix) && string(name[:len(corev1.ResourceHugePagesPrefix)]) == corev1.ResourceHugePagesPrefix {
			have.Add(q)
		}
	}
	need := *resource.NewQuantity(guest, resource.BinarySI)
	if !vmi.Spec.Domain.Resources.OvercommitGuestOverhead {
		need.Add(overhead)
	}
	if have.Cmp(need) < 0 {
		t.Errorf("compute requests %s of memory (huge pages included); the guest needs %s (guest %d + overhead %s)", have.String(), need.String(), guest, overhead.String())
	}
	if overhead.CmpInt64(fixedOverhead) < 0 {
		t.Errorf("overhead %s is less than the fixed %d bytes", overhead.String(), int64(fixedOverhead))
	}
	if cpu := vmi.Spec.Domain.CPU; cpu != nil && cpu.DedicatedCPUPlacement {
		for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
				if req.Cmp(lim) != 0 {
					t.Errorf("dedicated CPUs need Guaranteed QoS, but container %s requests %s of %s with limit %s", c.Name, req.String(), res, lim.String())
				}
			}
		}
	}
}

// checkHostPaths checks that the pod mounts a directory of the node only
// for a hostDisk volume of the VMI, and only when the HostDisk feature gate
// is on.
func checkHostPaths(t testing.TB, r *Renderer, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) {
	t.Helper()
	gate := r.cfg.gateEnabled(HostDiskGate)
	hostDisks := map[string]bool{}
	for _, vol := range vmi.Spec.Volumes {
		if vol.HostDisk != nil {
			if !gate {
				t.Errorf("hostDisk volume %q rendered without the %s feature gate", vol.Name, HostDiskGate)
			}
			hostDisks[vol.Name] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && !hostDisks[v.Name] {
			t.Errorf("pod volume %q mounts the node's %s, but the VMI has no hostDisk volume of that name", v.Name, v.HostPath.Path)
		}
	}
}

// scribble overwrites every string, number and bool reachable from v, so a
// pod that shares memory with its VMI shows up as a changed VMI.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scribble(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~")
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.CanSet() {
			v.SetUint(v.Uint() + 1)
		}
	}
}

// checkRenderIsolated renders vmi twice and checks that rendering is
// deterministic, leaves vmi alone, and returns a pod that shares no memory
// with vmi or with other pods.
func checkRenderIsolated(t testing.TB, r *Renderer, vmi *v1.VirtualMachineInstance) {
	t.Helper()
	before := vmi.DeepCopy()
	pod1, err1 := r.RenderLaunchPod(vmi)
	pod2, err2 := r.RenderLaunchPod(vmi)
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("two renders disagree: %v / %v", err1, err2)
	}
	if diff := cmp.Diff(before, vmi); diff != "" {
		t.Fatalf("rendering changed the VMI (-before +after):\n%s", diff)
	}
	if err1 != nil {
		return
	}
	if diff := cmp.Diff(pod1, pod2); diff != "" {
		t.Fatalf("two renders of one VMI differ:\n%s", diff)
	}
	scribble(reflect.ValueOf(pod1))
	if diff := cmp.Diff(before, vmi); diff != "" {
		t.Fatalf("changing the pod changed the VMI: they share memory (-before +after):\n%s", diff)
	}
	pod3, err := r.RenderLaunchPod(vmi)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pod2, pod3); diff != "" {
		t.Fatalf("changing a pod changed the next render: the renderer shares memory between pods:\n%s", diff)
	}
}

// randomVMI builds a VMI from rng that is mostly valid, with every feature
// the renderer looks at switched on or off at random.
func randomVMI(rng *rand.Rand) *v1.VirtualMachineInstance {
	q := resource.MustParse
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name = "vm-" + strconv.Itoa(rng.IntN(1000))
	vmi.Namespace = "ns"
	vmi.UID = types.UID("uid-" + vmi.Name)
	if rng.IntN(2) == 0 {
		vmi.Labels = map[string]string{"app": "x", v1.AppLabel: "spoofed"}
		vmi.Annotations = map[string]string{"a": "b", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	}
	d := &vmi.Spec.Domain
	memories := []string{"64M", "128Mi", "1Gi", "1500Mi", "16Gi", "100Gi"}
	mem := q(memories[rng.IntN(len(memories))])
	switch rng.IntN(4) {
	case 0:
		d.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: mem}
	case 1:
		d.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: mem}
	case 2:
		d.Memory = &v1.Memory{Guest: &mem}
	case 3:
		d.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: mem}
		l := mem.DeepCopy()
		l.Add(q("1Gi"))
		d.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: l}
	}
	if rng.IntN(3) == 0 {
		if d.Resources.Requests == nil {
			d.Resources.Requests = corev1.ResourceList{}
		}
		d.Resources.Requests[corev1.ResourceCPU] = q([]string{"100m", "1", "2500m"}[rng.IntN(3)])
	}
	d.Resources.OvercommitGuestOverhead = rng.IntN(5) == 0
	if rng.IntN(2) == 0 {
		d.CPU = &v1.CPU{Sockets: uint32(rng.IntN(3)), Cores: uint32(rng.IntN(9)), Threads: uint32(rng.IntN(3))}
		if rng.IntN(3) == 0 {
			d.CPU.DedicatedCPUPlacement = true
			d.CPU.IsolateEmulatorThread = rng.IntN(2) == 0
			delete(d.Resources.Requests, corev1.ResourceCPU)
		}
	}
	if rng.IntN(5) == 0 {
		if d.Memory == nil {
			d.Memory = &v1.Memory{}
		}
		d.Memory.Hugepages = &v1.Hugepages{PageSize: "2Mi"}
		if m := d.Resources.Requests.Memory(); m != nil && m.Value()%(2<<20) != 0 {
			d.Memory.Hugepages.PageSize = "1Mi"
		}
	}
	if rng.IntN(3) == 0 {
		d.Devices.AutoattachGraphicsDevice = v1.BoolPtr(false)
	}
	d.Devices.DisableHotplug = rng.IntN(2) == 0
	if rng.IntN(4) == 0 {
		vmi.Spec.Architecture = "arm64"
	}
	vmi.Spec.Hostname = []string{"", "guest", "Bad_Host"}[rng.IntN(3)]

	sources := []func(i int) v1.VolumeSource{
		func(int) v1.VolumeSource {
			return v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "example.com/disk:1", ImagePullSecret: "pull"}}
		},
		func(i int) v1.VolumeSource {
			return v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: []string{"claim", "block-claim"}[i%2]},
				Hotpluggable:                      i%3 == 0,
			}}
		},
		func(int) v1.VolumeSource { return v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "dv"}} },
		func(int) v1.VolumeSource { return v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: q("1Gi")}} },
		func(int) v1.VolumeSource {
			return v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}}}
		},
		func(int) v1.VolumeSource {
			return v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}
		},
		func(int) v1.VolumeSource { return v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}} },
		func(int) v1.VolumeSource {
			return v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data/x.img", Type: v1.HostDiskExists}}
		},
		func(int) v1.VolumeSource {
			return v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "sa"}}
		},
		func(int) v1.VolumeSource { return v1.VolumeSource{} }, // invalid: no source
	}
	for i := range rng.IntN(6) {
		name := "v" + strconv.Itoa(i)
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: name, VolumeSource: sources[rng.IntN(len(sources))](i)})
		if rng.IntN(8) != 0 {
			d.Devices.Disks = append(d.Devices.Disks, v1.Disk{Name: name})
		}
	}
	if rng.IntN(10) == 0 {
		d.Devices.Disks = append(d.Devices.Disks, v1.Disk{Name: "missing"})
	}
	if rng.IntN(4) == 0 {
		d.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "example.com/kernel:1", KernelPath: "/vmlinuz"}}}
	}
	for i := range rng.IntN(3) {
		name := "net" + strconv.Itoa(i)
		iface := v1.Interface{Name: name}
		switch rng.IntN(4) {
		case 0:
			iface.Masquerade = &v1.InterfaceMasquerade{}
			iface.Ports = []v1.Port{{Name: "http", Port: 80}}
		case 1:
			iface.Bridge = &v1.InterfaceBridge{}
			iface.Model = "e1000"
		case 2:
			iface.SRIOV = &v1.InterfaceSRIOV{}
		case 3:
			iface.Slirp = &v1.InterfaceSlirp{}
		}
		d.Devices.Interfaces = append(d.Devices.Interfaces, iface)
		if rng.IntN(10) != 0 {
			vmi.Spec.Networks = append(vmi.Spec.Networks, v1.Network{Name: name, NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}})
		}
	}
	if rng.IntN(3) == 0 {
		vmi.Spec.NodeSelector = map[string]string{"zone": "a", v1.NodeSchedulable: "false"}
		vmi.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		vmi.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}},
			}}},
		}}
		vmi.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
	}
	return vmi
}

// TestRandomVMIProperties renders many random VMIs; every pod must satisfy
// the properties, and rendering must be deterministic and isolated. One
// renderer has the HostDisk feature gate on, the other off.
func TestRandomVMIProperties(t *testing.T) {
	r := newTestRenderer(t, nil)
	emu := newTestRenderer(t, func(c *Config) { c.EmulationAllowed = true; c.FeatureGates = []string{HostDiskGate} })
	rng := rand.New(rand.NewPCG(1, 2))
	rendered := 0
	for i := range 2000 {
		vmi := randomVMI(rng)
		for _, r := range []*Renderer{r, emu} {
			pod, err := r.RenderLaunchPod(vmi)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field == "" || fe.Name != vmi.Name {
					t.Fatalf("VMI %d: error %v is not a FieldError naming the VMI and a field", i, err)
				}
				continue
			}
			rendered++
			checkVMIProperties(t, r, vmi, pod)
			if t.Failed() {
				y, _ := yaml.Marshal(vmi)
				t.Fatalf("VMI %d:\n%s", i, y)
			}
		}
		if i%20 == 0 {
			checkRenderIsolated(t, r, vmi)
		}
	}
	// The generator must mostly produce VMIs that render, or this test
	// checks little.
	if rendered < 1000 {
		t.Errorf("only %d of 4000 renders succeeded", rendered)
	}
}

// TestGoldenRenderIsolated checks determinism and isolation on the golden VMIs.
func TestGoldenRenderIsolated(t *testing.T) {
	for _, c := range goldenCases {
		r := c.renderer(t)
		vmi := &v1.VirtualMachineInstance{}
		readObject(t, c.vmiFile(), vmi)
		checkRenderIsolated(t, r, vmi)
		pod, err := r.RenderLaunchPod(vmi)
		if err != nil {
			t.Fatal(err)
		}
		checkVMIProperties(t, r, vmi, pod)
	}
}

// FuzzRenderLaunchPod feeds arbitrary VMI JSON to the renderer: it must
// never panic, and what it renders must satisfy the properties.
func FuzzRenderLaunchPod(f *testing.F) {
	for _, c := range goldenCases {
		vmi := &v1.VirtualMachineInstance{}
		readObject(f, c.vmiFile(), vmi)
		data, err := json.Marshal(vmi)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		data, _ := json.Marshal(randomVMI(rng))
		f.Add(data)
	}
	r := newTestRenderer(f, func(c *Config) { c.FeatureGates = []string{HostDiskGate} })
	f.Fuzz(func(t *testing.T, data []byte) {
		vmi := &v1.VirtualMachineInstance{}
		if err := json.Unmarshal(data, vmi); err != nil {
			return
		}
		_ = r.MemoryOverhead(vmi)
		pod, err := r.RenderLaunchPod(vmi)
		if err != nil {
			return
		}
		checkVMIProperties(t, r, vmi, pod)
		migration := &v1.VirtualMachineInstanceMigration{}
		migration.Name, migration.Namespace, migration.UID, migration.Spec.VMIName = "m", vmi.Namespace, "m-uid", vmi.Name
		if _, err := r.RenderMigrationTargetPod(vmi, migration); err != nil {
			t.Fatalf("the launch pod renders but the migration target does not: %v", err)
		}
	})
}
