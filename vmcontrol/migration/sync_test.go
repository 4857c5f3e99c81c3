package migration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

var now = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func TestLiveMigratable(t *testing.T) {
	claims := map[string]*corev1.PersistentVolumeClaim{
		"rwx": {Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}},
		"rwo": {Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}},
		"bound-rwx": {
			Spec:   corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			Status: corev1.PersistentVolumeClaimStatus{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
		},
	}
	lookup := func(_, name string) *corev1.PersistentVolumeClaim { return claims[name] }
	vol := func(name string, src v1.VolumeSource) v1.Volume { return v1.Volume{Name: name, VolumeSource: src} }
	cases := []struct {
		name       string
		edit       func(*v1.VirtualMachineInstance)
		wantStatus corev1.ConditionStatus
		wantReason string
		wantMsg    string
		wantMethod v1.VirtualMachineInstanceMigrationMethod
	}{
		{"container disk: copied, block migration", func(*v1.VirtualMachineInstance) {}, corev1.ConditionTrue, "", "", v1.BlockMigration},
		{"RWX claim only: live migration", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "rwx"}}})}
		}, corev1.ConditionTrue, "", "", v1.LiveMigration},
		{"bound claim's status modes count", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "bound-rwx"}})}
		}, corev1.ConditionTrue, "", "", v1.LiveMigration},
		{"RWO claim", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, vol("data", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "rwo"}}}))
		}, corev1.ConditionFalse, ReasonDisksNotMigratable, "cannot migrate VMI: PVC rwo is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", v1.BlockMigration},
		{"hotplugged shared claim", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, vol("hp", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "rwx"}}}))
		}, corev1.ConditionTrue, "", "", v1.BlockMigration},
		{"hotplugged RWO claim", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("hp", v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Hotpluggable: true, Name: "rwo"}})}
		}, corev1.ConditionFalse, ReasonDisksNotMigratable, "cannot migrate VMI: PVC rwo is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", v1.BlockMigration},
		{"memory dump under way", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("dump", v1.VolumeSource{MemoryDump: &v1.MemoryDumpVolumeSource{ClaimName: "rwx", Hotpluggable: true}})}
		}, corev1.ConditionFalse, ReasonDisksNotMigratable, "cannot migrate VMI: a memory dump onto volume dump is under way", v1.LiveMigration},
		{"missing claim", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "nope"}})}
		}, corev1.ConditionFalse, ReasonDisksNotMigratable, "cannot migrate VMI: Unable to determine if PVC nope is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", v1.BlockMigration},
		{"host disk not shared", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/d.img", Type: v1.HostDiskExists}})}
		}, corev1.ConditionFalse, ReasonDisksNotMigratable, "cannot migrate VMI with non-shared HostDisk", v1.BlockMigration},
		{"shared host disk", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/d.img", Type: v1.HostDiskExists, Shared: ptr(true)}})}
		}, corev1.ConditionTrue, "", "", v1.LiveMigration},
		{"read-only CD-ROM is not copied", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}})}
			vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "disk", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{}}}}
		}, corev1.ConditionTrue, "", "", v1.LiveMigration},
		{"persistent TPM on a ReadWriteOnce backend-storage claim", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.TPM = &v1.TPMDevice{Persistent: ptr(true)}
			claims["persistent-state-for-vmi"] = claims["rwo"]
		}, corev1.ConditionFalse, ReasonDisksNotMigratable, "cannot migrate VMI: backend-storage PVC persistent-state-for-vmi (its persistent state) is not shared, live migration requires ReadWriteMany", v1.BlockMigration},
		{"persistent EFI on a shared backend-storage claim", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{Persistent: ptr(true)}}}
			claims["persistent-state-for-vmi"] = claims["rwx"]
		}, corev1.ConditionTrue, "", "", v1.BlockMigration},
		{"bridge on the pod network", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
		}, corev1.ConditionFalse, ReasonInterfaceNotMigratable, "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network", v1.BlockMigration},
		{"bridge allowed by annotation", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
			vmi.Annotations = map[string]string{AllowPodBridgeNetworkLiveMigrationAnnotation: ""}
		}, corev1.ConditionTrue, "", "", v1.BlockMigration},
		{"passtBinding on the pod network", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}
		}, corev1.ConditionTrue, "", "", v1.BlockMigration},
		{"host device", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.HostDevices = []v1.HostDevice{{Name: "dev", DeviceName: "vendor.com/dev"}}
		}, corev1.ConditionFalse, ReasonHostDeviceNotMigratable, "VMI specifies non-migratable generic PCI host device", v1.BlockMigration},
		{"SEV", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.LaunchSecurity = &v1.LaunchSecurity{SEV: &v1.SEV{}}
		}, corev1.ConditionFalse, ReasonSEVNotMigratable, "VMI uses SEV", v1.BlockMigration},
		{"interface reason wins over disks", func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
			vmi.Spec.Volumes = []v1.Volume{vol("disk", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/d.img", Type: v1.HostDiskExists}})}
		}, corev1.ConditionFalse, ReasonInterfaceNotMigratable, "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network", v1.BlockMigration},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi := runningVMI()
			tc.edit(vmi)
			cond, method := LiveMigratable(vmi, lookup)
			got := []string{string(cond.Type), string(cond.Status), cond.Reason, cond.Message, string(method)}
			want := []string{"LiveMigratable", string(tc.wantStatus), tc.wantReason, tc.wantMsg, string(tc.wantMethod)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveConfiguration(t *testing.T) {
	got := ResolveConfiguration(nil)
	if *got.ParallelMigrationsPerCluster != 5 || *got.ParallelOutboundMigrationsPerNode != 2 || *got.CompletionTimeoutPerGiB != 150 ||
		*got.ProgressTimeout != 150 || !got.BandwidthPerMigration.IsZero() || *got.AllowPostCopy {
		t.Errorf("defaults: %+v", got)
	}
	in := &v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr(uint32(1)), CompletionTimeoutPerGiB: ptr(int64(10))}
	got = ResolveConfiguration(in)
	if *got.ParallelMigrationsPerCluster != 1 || *got.CompletionTimeoutPerGiB != 10 || *got.ParallelOutboundMigrationsPerNode != 2 {
		t.Errorf("set values: %+v", got)
	}
	if in.ParallelOutboundMigrationsPerNode != nil {
		t.Error("ResolveConfiguration changed its argument")
	}
}

// runningVMI is a VMI running on node01 with a container disk and a
// masquerade interface.
func runningVMI() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vmi", Namespace: "ns", UID: "vmi-uid", ResourceVersion: "1", Labels: map[string]string{v1.NodeNameLabel: "node01"}},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{Devices: v1.Devices{
				Interfaces: []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}},
			}},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Volumes:  []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}},
		},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01", ActivePods: map[types.UID]string{"source-uid": "node01"},
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}},
	}
}

func newMigration(phase v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
	return &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "mig", Namespace: "ns", UID: "mig-uid", Finalizers: []string{Finalizer},
			Labels: map[string]string{v1.MigrationSelectorLabel: "vmi"}, CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec:   v1.VirtualMachineInstanceMigrationSpec{VMIName: "vmi"},
		Status: v1.VirtualMachineInstanceMigrationStatus{Phase: phase},
	}
}

func launcher(name, uid, node string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(now.Add(-30 * time.Second)),
			Labels: map[string]string{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: "vmi-uid"}, Annotations: map[string]string{}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "compute", Ready: ready}}},
	}
}

// target is the migration's target pod on node02.
func target(phase corev1.PodPhase, ready bool) *corev1.Pod {
	p := launcher("virt-launcher-vmi-target", "target-uid", "node02", phase, ready)
	p.Labels[v1.MigrationJobLabel] = "mig-uid"
	p.Annotations[migrationJobNameAnnotation] = "mig"
	return p
}

func source() *corev1.Pod {
	p := launcher("virt-launcher-vmi-source", "source-uid", "node01", corev1.PodRunning, true)
	p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	return p
}

// handedOff is the VMI's migration state once the controller handed
// migration mig off.
func handedOff(edit func(*v1.VirtualMachineInstanceMigrationState)) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{MigrationUID: "mig-uid", SourceNode: "node01", TargetNode: "node02",
			SourcePod: "virt-launcher-vmi-source", TargetPod: "virt-launcher-vmi-target"}
		vmi.Labels[v1.MigrationTargetNodeNameLabel] = "node02"
		if edit != nil {
			edit(vmi.Status.MigrationState)
		}
	}
}

type fakeRenderer struct{}

func (fakeRenderer) RenderMigrationTargetPod(vmi *v1.VirtualMachineInstance, m *v1.VirtualMachineInstanceMigration) (*corev1.Pod, error) {
	p := target(corev1.PodPending, false)
	p.UID = ""
	p.Labels[v1.MigrationJobLabel] = string(m.UID)
	return p, nil
}

type harness struct {
	c      *Controller
	client *fake.Clientset
	kube   *kubefake.Clientset
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	var kv, kube []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Pod, *corev1.PersistentVolumeClaim:
			kube = append(kube, o)
		default:
			kv = append(kv, o)
		}
	}
	client := fake.NewSimpleClientset(kv...)
	kubeClient := kubefake.NewSimpleClientset(kube...)
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := kubeinformers.NewSharedInformerFactory(kubeClient, 0)
	migrations := f.Kubevirt().V1().VirtualMachineInstanceMigrations().Informer()
	vmis := f.Kubevirt().V1().VirtualMachineInstances().Informer()
	kubevirts := f.Kubevirt().V1().KubeVirts().Informer()
	pods := kf.Core().V1().Pods().Informer()
	claims := kf.Core().V1().PersistentVolumeClaims().Informer()
	c, err := New(Config{Client: client.KubevirtV1(), Renderer: fakeRenderer{},
		Kube:       kubeclient.PodsGetterFunc(func(ns string) kubeclient.PodInterface { return kubeClient.CoreV1().Pods(ns) }),
		Migrations: migrations, VMIs: vmis, Pods: pods, Claims: claims, KubeVirts: kubevirts})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.(type) {
		case *v1.VirtualMachineInstanceMigration:
			_ = migrations.GetIndexer().Add(o)
		case *v1.VirtualMachineInstance:
			_ = vmis.GetIndexer().Add(o)
		case *v1.KubeVirt:
			_ = kubevirts.GetIndexer().Add(o)
		case *corev1.Pod:
			_ = pods.GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			_ = claims.GetIndexer().Add(o)
		}
	}
	c.now = func() time.Time { return now }
	client.ClearActions()
	kubeClient.ClearActions()
	return &harness{c: c, client: client, kube: kubeClient}
}

// writes lists the write requests sent, as "verb resource[/subresource]":
// those to pods first, then those to kubevirt.io.
func (h *harness) writes() []string {
	var out []string
	for _, a := range append(h.kube.Actions(), h.client.Actions()...) {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func (h *harness) migration(t *testing.T) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	m, err := h.client.KubevirtV1().VirtualMachineInstanceMigrations("ns").Get(context.Background(), "mig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// patches returns the JSON patches sent to the VMI.
func (h *harness) patches(t *testing.T) []string {
	var out []string
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "virtualmachineinstances" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func TestSyncPhases(t *testing.T) {
	type tc struct {
		name       string
		phase      v1.VirtualMachineInstanceMigrationPhase
		vmi        func(*v1.VirtualMachineInstance)
		pods       []*corev1.Pod
		deleting   bool
		wantPhase  v1.VirtualMachineInstanceMigrationPhase
		wantWrites []string
		wantEvent  string
	}
	none := func(*v1.VirtualMachineInstance) {}
	cases := []tc{
		{"new migration: Pending", "", none, []*corev1.Pod{source()}, false,
			v1.MigrationPending, []string{"update virtualmachineinstancemigrations/status"}, ""},
		{"pending: the target pod is created", v1.MigrationPending, none, []*corev1.Pod{source()}, false,
			v1.MigrationPending, []string{"create pods"}, "Created migration target pod virt-launcher-vmi-target"},
		{"not migratable: Failed with the reason", "", func(vmi *v1.VirtualMachineInstance) {
			vmi.Status.Conditions[0] = v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
				Reason: ReasonDisksNotMigratable, Message: "cannot migrate VMI with non-shared HostDisk"}
		}, []*corev1.Pod{source()}, false,
			v1.MigrationFailed, []string{"update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"},
			"Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI with non-shared HostDisk"},
		{"another unfinished migration holds the VMI", "", func(vmi *v1.VirtualMachineInstance) {
			handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.MigrationUID = "other-uid" })(vmi)
		}, []*corev1.Pod{source()}, false,
			v1.MigrationFailed, []string{"update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"},
			"VMI is not eligible for migration because another migration job is in progress."},
		{"VMI not running yet: stays Pending", v1.MigrationPending, func(vmi *v1.VirtualMachineInstance) { vmi.Status.Phase = v1.Scheduled },
			[]*corev1.Pod{source()}, false, v1.MigrationPending, nil, ""},
		{"target pod exists: Scheduling", v1.MigrationPending, none, []*corev1.Pod{source(), target(corev1.PodPending, false)}, false,
			v1.MigrationScheduling, []string{"update virtualmachineinstancemigrations/status"}, ""},
		{"target pod ready: Scheduled", v1.MigrationScheduling, none, []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationScheduled, []string{"update virtualmachineinstancemigrations/status"}, ""},
		{"scheduled: handed off to the node agents", v1.MigrationScheduled, none, []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationScheduled, []string{"patch virtualmachineinstances"}, "Migration target pod is ready for preparation by virt-handler."},
		{"handed off: PreparingTarget", v1.MigrationScheduled, handedOff(nil), []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationPreparingTarget, []string{"update virtualmachineinstancemigrations/status"}, ""},
		{"target address: TargetReady", v1.MigrationPreparingTarget, handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.TargetNodeAddress = "10.0.0.2" }),
			[]*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationTargetReady, []string{"update virtualmachineinstancemigrations/status"}, ""},
		{"started: Running", v1.MigrationTargetReady, handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) {
			ms.TargetNodeAddress, ms.StartTimestamp = "10.0.0.2", &metav1.Time{Time: now}
		}), []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationRunning, []string{"update virtualmachineinstancemigrations/status"}, ""},
		{"completed: Succeeded, finalizer removed", v1.MigrationRunning, handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) {
			ms.TargetNodeAddress, ms.StartTimestamp, ms.EndTimestamp, ms.Completed = "10.0.0.2", &metav1.Time{Time: now}, &metav1.Time{Time: now}, true
		}), []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationSucceeded, []string{"update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"}, "Source node reported migration succeeded"},
		{"every step at once", v1.MigrationScheduled, handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) {
			ms.TargetNodeAddress, ms.StartTimestamp, ms.EndTimestamp, ms.Completed = "10.0.0.2", &metav1.Time{Time: now}, &metav1.Time{Time: now}, true
		}), []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationSucceeded, []string{"update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"}, "Source node reported migration succeeded"},
		{"source reports failure: Failed, target pod deleted", v1.MigrationRunning, handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) {
			ms.StartTimestamp, ms.Completed, ms.Failed = &metav1.Time{Time: now}, true, true
		}), []*corev1.Pod{source(), target(corev1.PodRunning, true)}, false,
			v1.MigrationFailed, []string{"delete pods", "update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"}, "source node reported migration failed"},
		{"target pod exited before the start: marked failed on the VMI", v1.MigrationPreparingTarget, handedOff(nil),
			[]*corev1.Pod{source(), target(corev1.PodFailed, false)}, false,
			v1.MigrationFailed, []string{"patch virtualmachineinstances", "update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"},
			"Migration failed because target pod shutdown during migration"},
		{"target pod gone", v1.MigrationScheduling, none, []*corev1.Pod{source()}, false,
			v1.MigrationFailed, []string{"update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"}, "Migration target pod was removed during active migration."},
		{"VMI shut down", v1.MigrationRunning, func(vmi *v1.VirtualMachineInstance) { handedOff(nil)(vmi); vmi.Status.Phase = v1.Succeeded },
			[]*corev1.Pod{target(corev1.PodRunning, true)}, false,
			v1.MigrationFailed, []string{"update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"},
			"Migration failed vmi shutdown during migration."},
		{"canceled before the handoff: target pod deleted, Failed", v1.MigrationScheduling, none, []*corev1.Pod{source(), target(corev1.PodPending, false)}, true,
			v1.MigrationFailed, []string{"delete pods", "update virtualmachineinstancemigrations/status", "update virtualmachineinstancemigrations"}, "Migration failed due to being canceled"},
		{"canceled while running: abort requested on the VMI", v1.MigrationRunning, handedOff(func(ms *v1.VirtualMachineInstanceMigrationState) {
			ms.TargetNodeAddress, ms.StartTimestamp = "10.0.0.2", &metav1.Time{Time: now}
		}), []*corev1.Pod{source(), target(corev1.PodRunning, true)}, true,
			v1.MigrationRunning, []string{"patch virtualmachineinstances", "update virtualmachineinstancemigrations/status"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi := runningVMI()
			tc.vmi(vmi)
			m := newMigration(tc.phase)
			if tc.deleting {
				m.DeletionTimestamp = &metav1.Time{Time: now}
			}
			objs := []runtime.Object{vmi, m}
			if ms := vmi.Status.MigrationState; ms != nil && ms.MigrationUID != m.UID {
				other := newMigration(v1.MigrationRunning)
				other.Name, other.UID = "other", ms.MigrationUID
				objs = append(objs, other)
			}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			h := newHarness(t, objs...)
			rec := newRecorder()
			h.c.recorder = rec
			err := h.c.sync(context.Background(), "ns/mig")
			if err != nil && !reconcile.IsRequeue(err) {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWrites, h.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			got := h.migration(t)
			if got.Status.Phase != tc.wantPhase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tc.wantPhase)
			}
			if tc.wantEvent != "" && !rec.has(tc.wantEvent) {
				t.Errorf("no event %q in %q", tc.wantEvent, rec.events)
			}
			if tc.deleting && got.Status.Phase != "" && !hasCondition(&got.Status, v1.VirtualMachineInstanceMigrationAbortRequested) {
				t.Errorf("canceled migration without the %s condition: %+v", v1.VirtualMachineInstanceMigrationAbortRequested, got.Status.Conditions)
			}
		})
	}
}

// TestHandOff checks what the handoff writes on the VMI: KubeVirt's
// migration state and target node label, guarded by test operations.
func TestHandOff(t *testing.T) {
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"},
		Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{MigrationConfiguration: &v1.MigrationConfiguration{CompletionTimeoutPerGiB: ptr(int64(30))}}}}
	h := newHarness(t, runningVMI(), newMigration(v1.MigrationScheduled), source(), target(corev1.PodRunning, true), kv)
	if err := h.c.sync(context.Background(), "ns/mig"); err != nil {
		t.Fatal(err)
	}
	patches := h.patches(t)
	if len(patches) != 1 {
		t.Fatalf("patches %q, want one", patches)
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(patches[0]), &ops); err != nil {
		t.Fatal(err)
	}
	var state v1.VirtualMachineInstanceMigrationState
	var labels map[string]string
	var got []string
	for _, op := range ops {
		got = append(got, op.Op+" "+op.Path)
		switch {
		case op.Op == "add" && op.Path == "/status/migrationState":
			_ = json.Unmarshal(op.Value, &state)
		case op.Op == "add" && op.Path == "/metadata/labels":
			_ = json.Unmarshal(op.Value, &labels)
		}
	}
	want := []string{"test /status/migrationState", "add /status/migrationState", "test /metadata/labels", "add /metadata/labels"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if state.MigrationUID != "mig-uid" || state.SourceNode != "node01" || state.TargetNode != "node02" ||
		state.SourcePod != "virt-launcher-vmi-source" || state.TargetPod != "virt-launcher-vmi-target" {
		t.Errorf("migration state %+v", state)
	}
	if cfg := state.MigrationConfiguration; cfg == nil || *cfg.CompletionTimeoutPerGiB != 30 || *cfg.ProgressTimeout != 150 {
		t.Errorf("migration configuration %+v, want the KubeVirt CR's completionTimeoutPerGiB 30 and defaults", cfg)
	}
	if labels[v1.MigrationTargetNodeNameLabel] != "node02" || labels[v1.NodeNameLabel] != "node01" {
		t.Errorf("labels %v", labels)
	}
}

// TestLimits: the KubeVirt CR's parallel limits hold a target pod back.
func TestLimits(t *testing.T) {
	busy := func(name, uid, vmiName, node string) (*v1.VirtualMachineInstanceMigration, *v1.VirtualMachineInstance) {
		m := newMigration(v1.MigrationRunning)
		m.Name, m.UID, m.Spec.VMIName = name, types.UID(uid), vmiName
		vmi := runningVMI()
		vmi.Name, vmi.UID, vmi.Status.NodeName = vmiName, types.UID(vmiName+"-uid"), node
		return m, vmi
	}
	cases := []struct {
		name     string
		cfg      v1.MigrationConfiguration
		busyNode string
		wantPod  bool
	}{
		{"room", v1.MigrationConfiguration{}, "node01", true},
		{"cluster limit", v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr(uint32(1))}, "node03", false},
		{"node limit", v1.MigrationConfiguration{ParallelOutboundMigrationsPerNode: ptr(uint32(1))}, "node01", false},
		{"node limit, other node busy", v1.MigrationConfiguration{ParallelOutboundMigrationsPerNode: ptr(uint32(1))}, "node03", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"},
				Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{MigrationConfiguration: &tc.cfg}}}
			om, ovmi := busy("other", "other-uid", "other-vmi", tc.busyNode)
			h := newHarness(t, runningVMI(), newMigration(v1.MigrationPending), source(), kv, om, ovmi)
			err := h.c.sync(context.Background(), "ns/mig")
			created := len(h.writes()) > 0 && h.writes()[0] == "create pods"
			if created != tc.wantPod {
				t.Errorf("target pod created: %v, want %v (writes %q, err %v)", created, tc.wantPod, h.writes(), err)
			}
			if !tc.wantPod && !reconcile.IsRequeue(err) {
				t.Errorf("held back without a later look: %v", err)
			}
		})
	}
}

// TestPendingTimeout: an unschedulable target pod is deleted after the
// migration's annotated timeout.
func TestPendingTimeout(t *testing.T) {
	pod := target(corev1.PodPending, false)
	pod.Spec.NodeName = ""
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	for _, tc := range []struct {
		timeout    string
		wantDelete bool
	}{{"60", false}, {"10", true}} {
		m := newMigration(v1.MigrationScheduling)
		m.Annotations = map[string]string{UnschedulableTimeoutAnnotation: tc.timeout}
		h := newHarness(t, runningVMI(), m, source(), pod)
		err := h.c.sync(context.Background(), "ns/mig")
		deleted := len(h.writes()) > 0 && h.writes()[0] == "delete pods"
		if deleted != tc.wantDelete {
			t.Errorf("timeout %ss after 30s pending: deleted %v (writes %q, err %v)", tc.timeout, deleted, h.writes(), err)
		}
	}
}

func TestSyncAddsFinalizerAndLabel(t *testing.T) {
	m := newMigration("")
	m.Finalizers, m.Labels = nil, nil
	h := newHarness(t, runningVMI(), m)
	if err := h.c.sync(context.Background(), "ns/mig"); err != nil {
		t.Fatal(err)
	}
	got := h.migration(t)
	if diff := cmp.Diff([]string{Finalizer}, got.Finalizers); diff != "" || got.Labels[v1.MigrationSelectorLabel] != "vmi" {
		t.Errorf("finalizers %v labels %v", got.Finalizers, got.Labels)
	}
}

func TestSyncMigratable(t *testing.T) {
	vmi := runningVMI()
	vmi.Status.Conditions = nil
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "rwo"}}}})
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "rwo", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	h := newHarness(t, vmi, claim)
	if err := h.c.syncMigratable(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vmi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := migratableCondition(got)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonDisksNotMigratable || got.Status.MigrationMethod != v1.BlockMigration {
		t.Errorf("condition %+v method %q", c, got.Status.MigrationMethod)
	}
	// Unchanged: no write.
	h = newHarness(t, got, claim)
	if err := h.c.syncMigratable(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("writes for an unchanged condition: %q", w)
	}
}

type recorder struct{ events []string }

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) Event(_ runtime.Object, typ, reason, msg string) {
	r.events = append(r.events, typ+" "+reason+" "+msg)
}
func (r *recorder) Eventf(o runtime.Object, typ, reason, format string, args ...any) {
	r.Event(o, typ, reason, fmt.Sprintf(format, args...))
}
func (r *recorder) AnnotatedEventf(o runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	r.Eventf(o, typ, reason, format, args...)
}
func (r *recorder) has(msg string) bool {
	for _, e := range r.events {
		if strings.HasSuffix(e, msg) {
			return true
		}
	}
	return false
}
