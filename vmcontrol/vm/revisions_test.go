package vm

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// revisionHarness syncs a VM controller that keeps start revisions, with
// client-go's fake for ControllerRevisions; the informers' caches are fed
// by hand from the fakes between syncs.
type revisionHarness struct {
	c      *Controller
	client *fake.Clientset
	kube   *kubefake.Clientset
	vms    cache.SharedIndexInformer
	vmis   cache.SharedIndexInformer
	revs   cache.SharedIndexInformer
}

func newRevisionHarness(t *testing.T, vm *v1.VirtualMachine) *revisionHarness {
	t.Helper()
	h := &revisionHarness{client: fake.NewSimpleClientset(vm), kube: kubefake.NewClientset()}
	f := externalversions.NewSharedInformerFactory(h.client, 0)
	h.vms, h.vmis = f.Kubevirt().V1().VirtualMachines().Informer(), f.Kubevirt().V1().VirtualMachineInstances().Informer()
	h.revs = cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.ControllerRevision{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c, err := New(Config{Client: h.client.KubevirtV1(), VMs: h.vms, VMIs: h.vmis, StartRevisions: h.revs,
		StartRevisionClient: kubeclient.ControllerRevisionsGetterFunc(func(ns string) kubeclient.ControllerRevisionInterface {
			return h.kube.AppsV1().ControllerRevisions(ns)
		})})
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	c.jitter = func() float64 { return 0 }
	h.c = c
	h.refresh(t)
	return h
}

// refresh copies the fakes' objects into the informers' caches and
// forgets the expectations a create set.
func (h *revisionHarness) refresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	vms, _ := h.client.KubevirtV1().VirtualMachines("ns").List(ctx, metav1.ListOptions{})
	vmis, _ := h.client.KubevirtV1().VirtualMachineInstances("ns").List(ctx, metav1.ListOptions{})
	revs, _ := h.kube.AppsV1().ControllerRevisions("ns").List(ctx, metav1.ListOptions{})
	var objs []any
	for i := range vms.Items {
		objs = append(objs, &vms.Items[i])
	}
	if err := h.vms.GetIndexer().Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
	objs = nil
	for i := range vmis.Items {
		objs = append(objs, &vmis.Items[i])
	}
	if err := h.vmis.GetIndexer().Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
	objs = nil
	for i := range revs.Items {
		objs = append(objs, &revs.Items[i])
	}
	if err := h.revs.GetIndexer().Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
	h.c.exp.Forget("ns/vm")
	h.c.stale.Forget("ns/vm")
}

func (h *revisionHarness) sync(t *testing.T) {
	t.Helper()
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
}

func (h *revisionHarness) revisionNames(t *testing.T) []string {
	t.Helper()
	revs, err := h.kube.AppsV1().ControllerRevisions("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range revs.Items {
		names = append(names, r.Name)
	}
	return names
}

// TestStartRevisionAndRestartRequired (#38 item 5): a start records the
// VM's spec in KubeVirt's revision-start-vm-<uid>-<generation>, named in
// the instance's status; a spec change while the instance runs gives the
// VM RestartRequired, reverting it clears the condition, and the restart
// replaces the revision with the new generation's.
func TestStartRevisionAndRestartRequired(t *testing.T) {
	ctx := context.Background()
	h := newRevisionHarness(t, newVM(v1.RunStrategyAlways))
	h.sync(t)
	first := StartRevisionName("vm-uid", 2)
	if got := h.revisionNames(t); len(got) != 1 || got[0] != first {
		t.Fatalf("revisions after the start: %v, want [%s]", got, first)
	}
	rev, _ := h.kube.AppsV1().ControllerRevisions("ns").Get(ctx, first, metav1.GetOptions{})
	if rev.Revision != 2 || rev.Labels[StartRevisionLabel] != "vm-uid" || metav1.GetControllerOf(rev) == nil || metav1.GetControllerOf(rev).UID != "vm-uid" {
		t.Errorf("revision %s: revision %d labels %v owner %+v", first, rev.Revision, rev.Labels, metav1.GetControllerOf(rev))
	}
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vmi.Status.VirtualMachineRevisionName != first {
		t.Errorf("VMI status.virtualMachineRevisionName = %q, want %q", vmi.Status.VirtualMachineRevisionName, first)
	}
	vmi.Status.Phase = v1.Running
	if _, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	h.sync(t)
	restartRequired := func() *v1.VirtualMachineCondition {
		vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range vm.Status.Conditions {
			if vm.Status.Conditions[i].Type == v1.VirtualMachineRestartRequired {
				return &vm.Status.Conditions[i]
			}
		}
		return nil
	}
	if c := restartRequired(); c != nil {
		t.Fatalf("RestartRequired %+v on a VM whose spec did not change", c)
	}

	// The user changes the guest's CPU while it runs.
	edit := func(cores uint32) {
		t.Helper()
		vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vm.Generation++
		vm.Spec.Template.Spec.Domain.CPU = nil
		if cores != 0 {
			vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Cores: cores}
		}
		if _, err := h.client.KubevirtV1().VirtualMachines("ns").Update(ctx, vm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.refresh(t)
		h.sync(t)
	}
	edit(2)
	c := restartRequired()
	if c == nil || c.Status != corev1.ConditionTrue || c.Message != RestartRequiredMessage {
		t.Fatalf("RestartRequired = %+v after a CPU change, want True with %q", c, RestartRequiredMessage)
	}
	edit(0) // back as it started
	if c := restartRequired(); c != nil {
		t.Fatalf("RestartRequired %+v after the change was reverted", c)
	}
	edit(2)

	// The restart: the instance goes, the next start records generation 5
	// and deletes the first revision; the new instance needs no restart.
	if err := h.client.KubevirtV1().VirtualMachineInstances("ns").Delete(ctx, "vm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	h.sync(t)
	second := StartRevisionName("vm-uid", 5)
	if got := h.revisionNames(t); len(got) != 1 || got[0] != second {
		t.Fatalf("revisions after the restart: %v, want [%s]", got, second)
	}
	if c := restartRequired(); c != nil {
		t.Fatalf("RestartRequired %+v after the restart", c)
	}
}

// TestCPUHotplug (#38 item 4): with KubeVirt's LiveUpdate rollout (the
// default), more sockets in a running VM's template, within the instance's
// maxSockets, are written to the instance (the node agent hot-plugs them)
// and need no restart; more than maxSockets, or other CPU changes, need
// one; with the Stage strategy every change does.
func TestCPUHotplug(t *testing.T) {
	ctx := context.Background()
	vm := newVM(v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, MaxSockets: 4}
	h := newRevisionHarness(t, vm)
	h.sync(t)
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vmi.Status.Phase = v1.Running
	if _, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	set := func(cpu v1.CPU) (restartRequired bool, sockets uint32) {
		t.Helper()
		vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vm.Generation++
		vm.Spec.Template.Spec.Domain.CPU = &cpu
		if _, err := h.client.KubevirtV1().VirtualMachines("ns").Update(ctx, vm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.refresh(t)
		h.sync(t)
		vm, _ = h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		for _, c := range vm.Status.Conditions {
			if c.Type == v1.VirtualMachineRestartRequired {
				restartRequired = true
			}
		}
		vmi, _ := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
		return restartRequired, vmi.Spec.Domain.CPU.Sockets
	}
	if rr, sockets := set(v1.CPU{Sockets: 3, Cores: 1, MaxSockets: 4}); rr || sockets != 3 {
		t.Errorf("3 sockets of at most 4: RestartRequired %v, instance sockets %d; want false, 3", rr, sockets)
	}
	if rr, sockets := set(v1.CPU{Sockets: 5, Cores: 1, MaxSockets: 4}); !rr || sockets != 3 {
		t.Errorf("5 sockets of at most 4: RestartRequired %v, instance sockets %d; want true, 3", rr, sockets)
	}
	if rr, sockets := set(v1.CPU{Sockets: 3, Cores: 2, MaxSockets: 4}); !rr || sockets != 3 {
		t.Errorf("2 cores: RestartRequired %v, instance sockets %d; want true, 3", rr, sockets)
	}
	// The Stage strategy: nothing is applied live.
	stage := v1.VMRolloutStrategyStage
	kvs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = kvs.Add(&v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "kubevirt"},
		Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{VMRolloutStrategy: &stage}}})
	h.c.kubevirts = kvs
	if rr, sockets := set(v1.CPU{Sockets: 4, Cores: 1, MaxSockets: 4}); !rr || sockets != 3 {
		t.Errorf("4 sockets with the Stage strategy: RestartRequired %v, instance sockets %d; want true, 3", rr, sockets)
	}
}

// TestMemoryHotplug: under LiveUpdate, more guest memory within the running
// instance's maxGuest (here the default) is patched into the instance, its memory request
// raised by as much; more than maxGuest, less than it booted with, or
// after a failed hotplug, the VM needs a restart.
func TestMemoryHotplug(t *testing.T) {
	ctx := context.Background()
	vm := newVM(v1.RunStrategyAlways)
	gi := resource.MustParse("1Gi")
	// No maxGuest: the instance gets KubeVirt's default, 4 × 1Gi.
	vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: &gi}
	h := newRevisionHarness(t, vm)
	h.sync(t)
	vmis := h.client.KubevirtV1().VirtualMachineInstances("ns")
	vmi, err := vmis.Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := vmi.Spec.Domain.Memory.MaxGuest; m == nil || m.String() != "4Gi" {
		t.Fatalf("the instance's maxGuest %v, want KubeVirt's default 4Gi", m)
	}
	vmi.Status.Phase = v1.Running
	vmi.Status.Memory = &v1.MemoryStatus{GuestAtBoot: &gi, GuestCurrent: &gi, GuestRequested: &gi}
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: gi}
	if _, err := vmis.Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	set := func(guest string) (restartRequired bool, got *v1.VirtualMachineInstance) {
		t.Helper()
		vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vm.Generation++
		vm.Spec.Template.Spec.Domain.Memory.Guest = ptr(resource.MustParse(guest))
		if _, err := h.client.KubevirtV1().VirtualMachines("ns").Update(ctx, vm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.refresh(t)
		h.sync(t)
		h.refresh(t)
		h.sync(t) // the VM's status after the instance took the memory
		vm, _ = h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		for _, c := range vm.Status.Conditions {
			if c.Type == v1.VirtualMachineRestartRequired {
				restartRequired = true
			}
		}
		got, _ = vmis.Get(ctx, "vm", metav1.GetOptions{})
		return restartRequired, got
	}
	if rr, got := set("1536Mi"); rr || got.Spec.Domain.Memory.Guest.String() != "1536Mi" ||
		got.Spec.Domain.Resources.Requests.Memory().String() != "1536Mi" {
		t.Errorf("1536Mi of at most 4Gi: RestartRequired %v, instance memory %s, request %s; want false, 1536Mi, 1536Mi",
			rr, got.Spec.Domain.Memory.Guest, got.Spec.Domain.Resources.Requests.Memory())
	}
	if rr, got := set("5Gi"); !rr || got.Spec.Domain.Memory.Guest.String() != "1536Mi" {
		t.Errorf("5Gi of at most 4Gi: RestartRequired %v, instance memory %s; want true, 1536Mi", rr, got.Spec.Domain.Memory.Guest)
	}
	if rr, got := set("512Mi"); !rr || got.Spec.Domain.Memory.Guest.String() != "1536Mi" {
		t.Errorf("512Mi, below the 1Gi booted: RestartRequired %v, instance memory %s; want true, 1536Mi", rr, got.Spec.Domain.Memory.Guest)
	}
	// A failed hotplug (the VMI controller's HotMemoryChange=False): a restart.
	vmi, _ = vmis.Get(ctx, "vm", metav1.GetOptions{})
	vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{
		Type: v1.VirtualMachineInstanceMemoryChange, Status: corev1.ConditionFalse, Reason: "Memory Hotplug Failed"})
	if _, err := vmis.Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rr, got := set("2Gi"); !rr || got.Spec.Domain.Memory.Guest.String() != "1536Mi" {
		t.Errorf("2Gi after a failed hotplug: RestartRequired %v, instance memory %s; want true, 1536Mi", rr, got.Spec.Domain.Memory.Guest)
	}
}

// TestPruneKeepsOtherVMsRevisions: pruning a VM's earlier start revisions
// finds them by the VM index and leaves the revision kept and every other
// VM's alone.
func TestPruneKeepsOtherVMsRevisions(t *testing.T) {
	rev := func(name, uid string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{StartRevisionLabel: uid}}}
	}
	revs := []*appsv1.ControllerRevision{rev("a-1", "uid-a"), rev("a-2", "uid-a"), rev("b-1", "uid-b"),
		{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled", Namespace: "ns"}}}
	kube := kubefake.NewClientset()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.ControllerRevision{}, 0, cache.Indexers{})
	s, err := newStartRevisions(inf, kubeclient.ControllerRevisionsGetterFunc(func(ns string) kubeclient.ControllerRevisionInterface {
		return kube.AppsV1().ControllerRevisions(ns)
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs {
		if _, err := kube.AppsV1().ControllerRevisions("ns").Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := inf.GetIndexer().Add(r); err != nil {
			t.Fatal(err)
		}
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"}}
	if err := s.prune(t.Context(), vm, "a-2"); err != nil {
		t.Fatal(err)
	}
	list, err := kube.AppsV1().ControllerRevisions("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	if want := []string{"a-2", "b-1", "unlabelled"}; !slices.Equal(names, want) {
		t.Errorf("revisions left %v, want %v", names, want)
	}
}
