package vm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// itHarness is a controller with instance type informers whose caches the
// test fills, over fake clients: the kubevirt.io and instancetype.kubevirt.io
// one, and client-go's for ControllerRevisions and claims.
type itHarness struct {
	c        *Controller
	client   *fake.Clientset
	kube     *kubefake.Clientset
	f        externalversions.SharedInformerFactory
	revs     cache.SharedIndexInformer
	claims   cache.SharedIndexInformer
	recorder *record.FakeRecorder
	rv       int
}

func newITHarness(t *testing.T, objs ...runtime.Object) *itHarness {
	t.Helper()
	client := fake.NewSimpleClientset()
	kube := kubefake.NewClientset()
	f := externalversions.NewSharedInformerFactory(client, 0)
	h := &itHarness{
		client: client, kube: kube, f: f,
		revs:     cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.ControllerRevision{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		claims:   cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.PersistentVolumeClaim{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		recorder: record.NewFakeRecorder(20),
	}
	it := f.Instancetype().V1beta1()
	c, err := New(Config{
		Client: client.KubevirtV1(), VMs: f.Kubevirt().V1().VirtualMachines().Informer(), VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer(),
		Instancetypes: it.VirtualMachineInstancetypes().Informer(), ClusterInstancetypes: it.VirtualMachineClusterInstancetypes().Informer(),
		Preferences: it.VirtualMachinePreferences().Informer(), ClusterPreferences: it.VirtualMachineClusterPreferences().Informer(),
		Revisions: h.revs, Claims: h.claims, Recorder: h.recorder,
		RevisionClient: kubeclient.ControllerRevisionsGetterFunc(func(ns string) kubeclient.ControllerRevisionInterface {
			return kube.AppsV1().ControllerRevisions(ns)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	c.jitter = func() float64 { return 0 }
	h.c = c
	for _, o := range objs {
		h.put(t, o)
	}
	return h
}

// put stores an object in the fake API server and in its informer's cache.
func (h *itHarness) put(t *testing.T, o runtime.Object) {
	t.Helper()
	ctx := context.Background()
	it := h.f.Instancetype().V1beta1()
	var err error
	switch o := o.(type) {
	case *v1.VirtualMachine:
		if _, err = h.client.KubevirtV1().VirtualMachines(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			_, err = h.client.KubevirtV1().VirtualMachines(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		} else {
			_, err = h.client.KubevirtV1().VirtualMachines(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err == nil {
			err = h.f.Kubevirt().V1().VirtualMachines().Informer().GetIndexer().Update(o)
		}
	case *instancetypev1beta1.VirtualMachineInstancetype:
		err = it.VirtualMachineInstancetypes().Informer().GetIndexer().Update(o)
	case *instancetypev1beta1.VirtualMachineClusterInstancetype:
		err = it.VirtualMachineClusterInstancetypes().Informer().GetIndexer().Update(o)
	case *instancetypev1beta1.VirtualMachinePreference:
		err = it.VirtualMachinePreferences().Informer().GetIndexer().Update(o)
	case *instancetypev1beta1.VirtualMachineClusterPreference:
		err = it.VirtualMachineClusterPreferences().Informer().GetIndexer().Update(o)
	case *corev1.PersistentVolumeClaim:
		err = h.claims.GetIndexer().Update(o)
	default:
		t.Fatalf("cannot put %T", o)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// sync runs one sync of ns/name and returns the writes it sent.
func (h *itHarness) sync(t *testing.T, name string) []string {
	t.Helper()
	h.client.ClearActions()
	h.kube.ClearActions()
	if err := h.c.sync(context.Background(), "ns/"+name); err != nil {
		t.Fatal(err)
	}
	return fakewrites.List(h.kube.Actions(), h.client.Actions())
}

// observe copies what the fake API server holds (the VM's status, the
// revisions) into the caches, as the informers would, and forgets the VM's
// instance, as if it had stopped.
func (h *itHarness) observe(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.rv++
	vm.ResourceVersion = fmt.Sprint(h.rv) // a new version, as the informer would see
	_ = h.f.Kubevirt().V1().VirtualMachines().Informer().GetIndexer().Update(vm)
	revs, err := h.kube.AppsV1().ControllerRevisions("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range revs.Items {
		_ = h.revs.GetIndexer().Update(&revs.Items[i])
	}
	_ = h.client.KubevirtV1().VirtualMachineInstances("ns").Delete(ctx, name, metav1.DeleteOptions{})
	h.c.exp.Forget("ns/" + name)
}

func (h *itHarness) vm(t *testing.T, name string) *v1.VirtualMachine {
	t.Helper()
	vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func (h *itHarness) vmi(t *testing.T, name string) *v1.VirtualMachineInstance {
	t.Helper()
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the VM's instance: %v", err)
	}
	return vmi
}

func sizedVM(name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	vm := newVM(strategy)
	vm.Name, vm.UID = name, types.UID("uid-"+name)
	vm.Spec.Instancetype = &v1.InstancetypeMatcher{Name: "small", Kind: "VirtualMachineInstancetype"}
	vm.Spec.Preference = &v1.PreferenceMatcher{Name: "linux"}
	vm.Spec.Template.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "root"}}
	vm.Spec.Template.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}}
	return vm
}

func smallInstancetype(generation int64, vcpus uint32) *instancetypev1beta1.VirtualMachineInstancetype {
	return &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "ns", UID: "it-uid", Generation: generation},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: vcpus},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")},
		},
	}
}

func linuxPreference() *instancetypev1beta1.VirtualMachineClusterPreference {
	cores := instancetypev1beta1.Cores
	return &instancetypev1beta1.VirtualMachineClusterPreference{
		ObjectMeta: metav1.ObjectMeta{Name: "linux", UID: "pref-uid", Generation: 1},
		Spec: instancetypev1beta1.VirtualMachinePreferenceSpec{
			CPU:     &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &cores},
			Devices: &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSATA, PreferredInterfaceModel: "e1000e"},
		},
	}
}

func TestInstancetypeExpandedIntoVMI(t *testing.T) {
	h := newITHarness(t, sizedVM("vm", v1.RunStrategyAlways), smallInstancetype(1, 2), linuxPreference())
	writes := h.sync(t, "vm")
	want := []string{"create controllerrevisions", "create controllerrevisions", "create virtualmachineinstances", "update virtualmachines/status"}
	if diff := cmp.Diff(want, writes); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	vmi := h.vmi(t, "vm")
	cpu := vmi.Spec.Domain.CPU
	if cpu == nil || cpu.Sockets != 1 || cpu.Cores != 2 || cpu.Threads != 1 {
		t.Errorf("cpu = %+v, want the 2 vCPUs as cores (the preference's topology)", cpu)
	}
	if g := vmi.Spec.Domain.Memory.Guest; g == nil || g.String() != "1Gi" {
		t.Errorf("guest memory = %v, want 1Gi", g)
	}
	if bus := vmi.Spec.Domain.Devices.Disks[0].Disk.Bus; bus != v1.DiskBusSATA {
		t.Errorf("disk bus = %q, want the preferred sata", bus)
	}
	if ifs := vmi.Spec.Domain.Devices.Interfaces; len(ifs) != 1 || ifs[0].Model != "e1000e" {
		t.Errorf("interfaces = %+v, want the default pod interface with the preferred model e1000e", ifs)
	}
	if vmi.Annotations[v1.InstancetypeAnnotation] != "small" || vmi.Annotations[v1.ClusterPreferenceAnnotation] != "linux" {
		t.Errorf("annotations = %v, want the instance type's and preference's names", vmi.Annotations)
	}
	st := h.vm(t, "vm").Status
	wantIT := &v1.InstancetypeStatusRef{Name: "small", Kind: "VirtualMachineInstancetype", ControllerRevisionRef: &v1.ControllerRevisionRef{Name: "vm-small-v1beta1-it-uid-1"}}
	wantPref := &v1.InstancetypeStatusRef{Name: "linux", ControllerRevisionRef: &v1.ControllerRevisionRef{Name: "vm-linux-v1beta1-pref-uid-1"}}
	if diff := cmp.Diff(wantIT, st.InstancetypeRef); diff != "" {
		t.Errorf("status.instancetypeRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantPref, st.PreferenceRef); diff != "" {
		t.Errorf("status.preferenceRef (-want +got):\n%s", diff)
	}
	rev, err := h.kube.AppsV1().ControllerRevisions("ns").Get(context.Background(), "vm-small-v1beta1-it-uid-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(rev); ref == nil || ref.Name != "vm" || ref.Kind != "VirtualMachine" {
		t.Errorf("revision controller = %+v, want the VM", ref)
	}
}

// TestPinnedRevisionSurvivesEdits: the copy pinned on the first sync sizes
// every later instance of the VM; an edited instance type sizes new VMs, and
// this one once its reference is dropped.
func TestPinnedRevisionSurvivesEdits(t *testing.T) {
	h := newITHarness(t, sizedVM("vm", v1.RunStrategyAlways), smallInstancetype(1, 2), linuxPreference())
	h.sync(t, "vm")
	h.observe(t, "vm")

	h.put(t, smallInstancetype(2, 4)) // edited: 4 vCPUs
	writes := h.sync(t, "vm")
	if diff := cmp.Diff([]string{"create virtualmachineinstances"}, writes); diff != "" {
		t.Errorf("restart writes (-want +got): no new revision, the status unchanged\n%s", diff)
	}
	if cores := h.vmi(t, "vm").Spec.Domain.CPU.Cores; cores != 2 {
		t.Errorf("the restarted VM has %d vCPUs, want the pinned 2", cores)
	}

	h.put(t, sizedVM("new", v1.RunStrategyAlways))
	h.sync(t, "new")
	if cores := h.vmi(t, "new").Spec.Domain.CPU.Cores; cores != 4 {
		t.Errorf("a new VM has %d vCPUs, want the edited 4", cores)
	}
	if got := h.vm(t, "new").Status.InstancetypeRef.ControllerRevisionRef.Name; got != "new-small-v1beta1-it-uid-2" {
		t.Errorf("the new VM pinned %s, want generation 2", got)
	}

	// Dropping the VM's reference takes the current instance type at the next start.
	vm := h.vm(t, "vm")
	vm.Status.InstancetypeRef = nil
	h.put(t, vm)
	h.observe(t, "vm")
	h.sync(t, "vm")
	if cores := h.vmi(t, "vm").Spec.Domain.CPU.Cores; cores != 4 {
		t.Errorf("after dropping its reference the VM has %d vCPUs, want 4", cores)
	}
}

func TestRevisionNameInMatcher(t *testing.T) {
	h := newITHarness(t, sizedVM("vm", v1.RunStrategyAlways), smallInstancetype(1, 2), linuxPreference())
	h.sync(t, "vm")
	h.observe(t, "vm")
	h.put(t, smallInstancetype(2, 4))
	// Another VM pinning the first VM's revision by name gets its 2 vCPUs.
	other := sizedVM("other", v1.RunStrategyAlways)
	other.Spec.Instancetype.RevisionName = "vm-small-v1beta1-it-uid-1"
	h.put(t, other)
	writes := h.sync(t, "other")
	if diff := cmp.Diff([]string{"create controllerrevisions", "create virtualmachineinstances", "update virtualmachines/status"}, writes); diff != "" {
		t.Errorf("writes (-want +got): only the preference's revision is new\n%s", diff)
	}
	if cores := h.vmi(t, "other").Spec.Domain.CPU.Cores; cores != 2 {
		t.Errorf("%d vCPUs, want the named revision's 2", cores)
	}
}

func failure(st v1.VirtualMachineStatus) *v1.VirtualMachineCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.VirtualMachineFailure {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestInstancetypeProblems(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1.VirtualMachine)
		objs   []runtime.Object
		reason string
		msg    string
	}{
		{
			name: "the template sets CPU sockets and a memory request",
			mutate: func(vm *v1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 2}
				vm.Spec.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			},
			reason: ReasonFailedCreate,
			msg: "error encountered while storing instancetype.kubevirt.io controllerRevisions: VM field(s) spec.template.spec.domain.cpu.sockets, " +
				"spec.template.spec.domain.resources.requests.memory conflicts with selected instance type (which sets spec.cpu.guest, spec.memory.guest)",
		},
		{
			name:   "no such instance type",
			mutate: func(vm *v1.VirtualMachine) { vm.Spec.Instancetype.Name = "huge" },
			reason: ReasonFailedFindInstancetype,
			msg:    `virtualmachineinstancetype.instancetype.kubevirt.io "huge" not found`,
		},
		{
			name:   "no such preference",
			mutate: func(vm *v1.VirtualMachine) { vm.Spec.Preference.Kind = "VirtualMachinePreference" },
			reason: ReasonFailedFindPreference,
			msg:    `virtualmachinepreference.instancetype.kubevirt.io "linux" not found`,
		},
		{
			name: "the preference requires more vCPUs",
			objs: []runtime.Object{func() runtime.Object {
				p := linuxPreference()
				p.Spec.Requirements = &instancetypev1beta1.PreferenceRequirements{CPU: &instancetypev1beta1.CPUPreferenceRequirement{Guest: 4}}
				return p
			}()},
			reason: ReasonFailedCreate,
			msg:    "failure checking preference requirements: insufficient CPU resources of 2 vCPU provided by instance type, preference requires 4 vCPU",
		},
		{
			name:   "a pinned revision that is gone",
			mutate: func(vm *v1.VirtualMachine) { vm.Spec.Instancetype.RevisionName = "vm-small-gone" },
			reason: ReasonFailedFindInstancetype,
			msg:    `ControllerRevision vm-small-gone of VirtualMachineInstancetype small: controllerrevisions.apps "vm-small-gone" not found`,
		},
	}
	for _, tc := range cases {
		for _, strategy := range []v1.VirtualMachineRunStrategy{v1.RunStrategyAlways, v1.RunStrategyHalted} {
			t.Run(tc.name+"/"+string(strategy), func(t *testing.T) {
				vm := sizedVM("vm", strategy)
				if tc.mutate != nil {
					tc.mutate(vm)
				}
				objs := append([]runtime.Object{vm, smallInstancetype(1, 2), linuxPreference()}, tc.objs...)
				h := newITHarness(t, objs...)
				writes := h.sync(t, "vm")
				if diff := cmp.Diff([]string{"update virtualmachines/status"}, writes); diff != "" {
					t.Errorf("writes (-want +got): no instance, no revision\n%s", diff)
				}
				cond := failure(h.vm(t, "vm").Status)
				if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != tc.reason || cond.Message != tc.msg {
					t.Fatalf("Failure condition = %+v\nwant reason %s, message %q", cond, tc.reason, tc.msg)
				}
				select {
				case ev := <-h.recorder.Events:
					if want := "Warning " + tc.reason + " " + tc.msg; ev != want {
						t.Errorf("event %q, want %q", ev, want)
					}
				default:
					t.Error("no event recorded")
				}
				// Reported once: the next sync, with the condition stored, adds no event.
				h.observe(t, "vm")
				h.sync(t, "vm")
				select {
				case ev := <-h.recorder.Events:
					t.Errorf("a second event %q for the same problem", ev)
				default:
				}
			})
		}
	}
}

// TestInstancetypeEventsEnqueueUsers: a VM waiting for its instance type is
// synced again when the instance type appears.
func TestInstancetypeEventsEnqueueUsers(t *testing.T) {
	h := newITHarness(t, sizedVM("vm", v1.RunStrategyAlways), sizedVM("other", v1.RunStrategyAlways))
	other := sizedVM("unrelated", v1.RunStrategyAlways)
	other.Spec.Instancetype.Name = "large"
	h.put(t, other)
	h.c.enqueueUsers(instancetype.KindInstancetype)(smallInstancetype(1, 2))
	h.c.enqueueUsers(instancetype.KindClusterInstancetype)(&instancetypev1beta1.VirtualMachineClusterInstancetype{ObjectMeta: metav1.ObjectMeta{Name: "small"}})
	h.c.enqueueUsers(instancetype.KindClusterPreference)(linuxPreference())
	var got []string
	for h.c.loop.Queue.Len() > 0 {
		k, _ := h.c.loop.Queue.Get()
		got = append(got, k)
		h.c.loop.Queue.Done(k)
	}
	// The preference event enqueues the unrelated VM too: it names linux.
	if diff := cmp.Diff([]string{"ns/other", "ns/unrelated", "ns/vm"}, sortedCopy(got)); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestInferFromVolume(t *testing.T) {
	claim := func(labels map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "ns", Labels: labels}}
	}
	inferring := func(policy v1.InferFromVolumeFailurePolicy) *v1.VirtualMachine {
		vm := sizedVM("vm", v1.RunStrategyAlways)
		vm.Spec.Instancetype = &v1.InstancetypeMatcher{InferFromVolume: "root", InferFromVolumeFailurePolicy: &policy}
		vm.Spec.Preference = nil
		vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: resource.NewQuantity(256<<20, resource.BinarySI)}
		vm.Spec.Template.Spec.Volumes[0].VolumeSource = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "root"}}}
		return vm
	}
	labelled := map[string]string{instancetype.DefaultInstancetypeLabel: "small", instancetype.DefaultInstancetypeKindLabel: "VirtualMachineInstancetype"}

	t.Run("the claim's labels name the instance type", func(t *testing.T) {
		h := newITHarness(t, inferring(v1.IgnoreInferFromVolumeFailure), smallInstancetype(1, 2), claim(labelled))
		h.sync(t, "vm")
		ref := h.vm(t, "vm").Status.InstancetypeRef
		if ref == nil || ref.Name != "small" || ref.Kind != "VirtualMachineInstancetype" || ref.InferFromVolume != "root" ||
			ref.ControllerRevisionRef == nil || *ref.InferFromVolumeFailurePolicy != v1.IgnoreInferFromVolumeFailure {
			t.Fatalf("status.instancetypeRef = %+v", ref)
		}
		// With Ignore, the template's memory was only the fallback.
		if g := h.vmi(t, "vm").Spec.Domain.Memory.Guest; g.String() != "1Gi" {
			t.Errorf("guest memory %v, want the instance type's 1Gi", g)
		}
		// Inferred once: relabelling the claim changes nothing for this VM.
		h.observe(t, "vm")
		h.put(t, claim(map[string]string{instancetype.DefaultInstancetypeLabel: "large"}))
		if writes := h.sync(t, "vm"); len(writes) != 1 || writes[0] != "create virtualmachineinstances" {
			t.Errorf("after relabelling: writes %v, want only the instance", writes)
		}
	})
	t.Run("ignore a claim without labels", func(t *testing.T) {
		h := newITHarness(t, inferring(v1.IgnoreInferFromVolumeFailure), smallInstancetype(1, 2), claim(nil))
		h.sync(t, "vm")
		vmi := h.vmi(t, "vm")
		if vmi.Spec.Domain.Memory.Guest.String() != "256Mi" || h.vm(t, "vm").Status.InstancetypeRef != nil {
			t.Errorf("memory %v, ref %+v; want the template's 256Mi and no instance type", vmi.Spec.Domain.Memory.Guest, h.vm(t, "vm").Status.InstancetypeRef)
		}
	})
	t.Run("reject a claim without labels", func(t *testing.T) {
		h := newITHarness(t, inferring(v1.RejectInferFromVolumeFailure), smallInstancetype(1, 2), claim(nil))
		if writes := h.sync(t, "vm"); len(writes) != 1 {
			t.Errorf("writes %v, want only the status", writes)
		}
		want := "unable to infer the instance type from volume root: unable to find required instancetype.kubevirt.io/default-instancetype label on the volume"
		if c := failure(h.vm(t, "vm").Status); c == nil || c.Reason != ReasonFailedFindInstancetype || c.Message != want {
			t.Errorf("Failure condition %+v, want %q", c, want)
		}
	})
	t.Run("a missing claim is retried", func(t *testing.T) {
		h := newITHarness(t, inferring(v1.IgnoreInferFromVolumeFailure), smallInstancetype(1, 2))
		err := h.c.sync(context.Background(), "ns/vm")
		if err == nil || !strings.Contains(err.Error(), "requeue after 1m0s") {
			t.Errorf("sync = %v, want a requeue in a minute", err)
		}
	})
}

func TestPreferredStorageClass(t *testing.T) {
	dv, err := NewDataVolume(vmWithDataVolume(v1.RunStrategyAlways), 0)
	if err != nil {
		t.Fatal(err)
	}
	setStorageClass(dv, "fast")
	if got, _, _ := unstructured.NestedString(dv.Object, "spec", "storage", "storageClassName"); got != "fast" {
		t.Errorf("storageClassName = %q, want fast", got)
	}
	setStorageClass(dv, "slow")
	if got, _, _ := unstructured.NestedString(dv.Object, "spec", "storage", "storageClassName"); got != "fast" {
		t.Errorf("storageClassName = %q, a set class must stay", got)
	}
}

func TestNewVMIRefusesUnexpandedVM(t *testing.T) {
	if _, err := NewVMI(sizedVM("vm", v1.RunStrategyAlways)); err == nil {
		t.Error("NewVMI of a VM naming an instance type: want an error pointing at NewExpandedVMI")
	}
}
