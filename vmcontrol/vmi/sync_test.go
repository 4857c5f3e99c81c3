package vmi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// podsOf reaches a fake clientset's pods through kubeclient's interface.
func podsOf(kube *kubefake.Clientset) kubeclient.PodsGetter {
	return kubeclient.PodsGetterFunc(func(ns string) kubeclient.PodInterface { return kube.CoreV1().Pods(ns) })
}

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fakeRenderer renders a minimal launcher pod, or fails.
type fakeRenderer struct{ err error }

func (r fakeRenderer) RenderLaunchPod(vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	if r.err != nil {
		return nil, r.err
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "virt-launcher-" + vmi.Name + "-", Name: "virt-launcher-" + vmi.Name + "-abcde", Namespace: vmi.Namespace,
			Labels:          map[string]string{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: string(vmi.UID)},
			OwnerReferences: []metav1.OwnerReference{controllerref.Ref(vmi, v1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ComputeContainer, Image: "launcher"}}},
	}, nil
}

// newVMI is a VMI as the VM controller creates it: finalizer and defaults set.
func newVMI(phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vmi", Namespace: "ns", UID: "vmi-uid", Finalizers: []string{v1.VirtualMachineControllerFinalizer}},
		Status:     v1.VirtualMachineInstanceStatus{Phase: phase},
	}
	v1.SetDefaults_VirtualMachineInstance(vmi)
	return vmi
}

func launcherPod(vmi *v1.VirtualMachineInstance, phase corev1.PodPhase, ready bool, node string) *corev1.Pod {
	p, _ := fakeRenderer{}.RenderLaunchPod(vmi)
	p.UID = "pod-uid"
	p.Spec.NodeName = node
	p.Status.Phase = phase
	p.Status.QOSClass = corev1.PodQOSBurstable
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ComputeContainer, Ready: ready}}
	if node != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	}
	return p
}

type harness struct {
	c      *Controller
	client *fake.Clientset
	kube   *kubefake.Clientset
}

func newHarness(t *testing.T, renderer PodRenderer, vmi *v1.VirtualMachineInstance, pods ...*corev1.Pod) *harness {
	t.Helper()
	client := fake.NewSimpleClientset(vmi)
	var kobjs []runtime.Object
	for _, p := range pods {
		kobjs = append(kobjs, p)
	}
	kube := kubefake.NewSimpleClientset(kobjs...)
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := kubeinformers.NewSharedInformerFactory(kube, 0)
	c, err := New(Config{Client: client.KubevirtV1(), Kube: podsOf(kube), Renderer: renderer,
		VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer(), Pods: kf.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Kubevirt().V1().VirtualMachineInstances().Informer().GetIndexer().Add(vmi)
	for _, p := range pods {
		_ = kf.Core().V1().Pods().Informer().GetIndexer().Add(p)
	}
	c.now = func() time.Time { return now }
	client.ClearActions()
	kube.ClearActions()
	return &harness{c: c, client: client, kube: kube}
}

func (h *harness) vmi(t *testing.T) *v1.VirtualMachineInstance {
	t.Helper()
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vmi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vmi
}

func TestSyncPhases(t *testing.T) {
	base := newVMI(v1.Scheduling)
	cases := []struct {
		name       string
		vmi        *v1.VirtualMachineInstance
		pod        *corev1.Pod
		wantPhase  v1.VirtualMachineInstancePhase
		wantWrites []string
		wantNode   string
	}{
		{"new VMI gets a pod", newVMI(""), nil, v1.Scheduling, []string{"create pods", "update virtualmachineinstances"}, ""},
		{"pending pod keeps Scheduling", base, launcherPod(base, corev1.PodPending, false, ""), v1.Scheduling, []string{"update virtualmachineinstances"}, ""},
		{"running ready pod means Scheduled: status and node label in one write", base, launcherPod(base, corev1.PodRunning, true, "node01"), v1.Scheduled,
			[]string{"update virtualmachineinstances"}, "node01"},
		{"running pod not ready stays Scheduling", base, launcherPod(base, corev1.PodRunning, false, "node01"), v1.Scheduling, []string{"update virtualmachineinstances"}, ""},
		{"failed pod fails the VMI", base, launcherPod(base, corev1.PodFailed, false, "node01"), v1.Failed, []string{"update virtualmachineinstances"}, ""},
		{"vanished pod fails the VMI", newVMI(v1.Scheduled), nil, v1.Failed, []string{"update virtualmachineinstances"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*corev1.Pod
			if tc.pod != nil {
				pods = append(pods, tc.pod)
			}
			h := newHarness(t, fakeRenderer{}, tc.vmi.DeepCopy(), pods...)
			if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWrites, fakewrites.List(h.kube.Actions(), h.client.Actions())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			got := h.vmi(t)
			if got.Status.Phase != tc.wantPhase || got.Status.NodeName != tc.wantNode || got.Labels[v1.NodeNameLabel] != tc.wantNode {
				t.Errorf("phase %q node %q label %q; want %q %q", got.Status.Phase, got.Status.NodeName, got.Labels[v1.NodeNameLabel], tc.wantPhase, tc.wantNode)
			}
			last := got.Status.PhaseTransitionTimestamps
			if len(last) == 0 || last[len(last)-1].Phase != tc.wantPhase {
				if tc.wantPhase != tc.vmi.Status.Phase {
					t.Errorf("no transition timestamp for %q: %+v", tc.wantPhase, last)
				}
			}
		})
	}
}

func TestNewVMIGetsPendingAndScheduling(t *testing.T) {
	h := newHarness(t, fakeRenderer{}, newVMI(""))
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	var phases []v1.VirtualMachineInstancePhase
	for _, ts := range h.vmi(t).Status.PhaseTransitionTimestamps {
		phases = append(phases, ts.Phase)
	}
	if diff := cmp.Diff([]v1.VirtualMachineInstancePhase{v1.Pending, v1.Scheduling}, phases); diff != "" {
		t.Fatalf("transitions (-want +got):\n%s", diff)
	}
	if len(h.vmi(t).Status.ActivePods) != 0 {
		t.Fatalf("activePods = %v; a pod without a node is not active yet", h.vmi(t).Status.ActivePods)
	}
	// The informers have shown neither the pod nor the status write: no second pod.
	h.client.ClearActions()
	h.kube.ClearActions()
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	for _, w := range fakewrites.List(h.kube.Actions()) {
		if w == "create pods" {
			t.Fatal("created a second pod before the first was observed")
		}
	}
	// Even with a fresh VMI in the cache, expectations hold the second create back.
	h2 := newHarness(t, fakeRenderer{}, h.vmi(t))
	h2.c.exp = h.c.exp
	if err := h2.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	for _, w := range fakewrites.List(h2.kube.Actions()) {
		if w == "create pods" {
			t.Fatal("created a second pod while a creation was expected")
		}
	}
}

func TestRenderErrorIsReported(t *testing.T) {
	h := newHarness(t, fakeRenderer{err: errors.New(`spec.domain.devices.disks[0]: volume "x" not found`)}, newVMI(""))
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatalf("a render error is permanent and must not be retried: %v", err)
	}
	vmi := h.vmi(t)
	c := vmi.VMICondition(v1.VirtualMachineInstanceSynchronized)
	if vmi.Status.Phase != v1.Pending || c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonFailedCreate {
		t.Fatalf("phase %q condition %+v", vmi.Status.Phase, c)
	}
}

func TestPodCreateErrorIsRetried(t *testing.T) {
	h := newHarness(t, fakeRenderer{}, newVMI(""))
	h.kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("quota exceeded")
	})
	if err := h.c.sync(context.Background(), "ns/vmi"); err == nil {
		t.Fatal("a failed pod create must be retried")
	}
	if !h.c.exp.Satisfied("ns/vmi") {
		t.Fatal("expectations must be lowered after a failed create")
	}
	if c := h.vmi(t).VMICondition(v1.VirtualMachineInstanceSynchronized); c == nil || c.Reason != ReasonFailedCreate {
		t.Fatalf("condition = %+v", c)
	}
}

func TestDeletedVMI(t *testing.T) {
	vmi := newVMI(v1.Running)
	ts := metav1.NewTime(now)
	vmi.DeletionTimestamp = &ts
	pod := launcherPod(vmi, corev1.PodRunning, true, "node01")

	h := newHarness(t, fakeRenderer{}, vmi.DeepCopy(), pod)
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"delete pods"}, fakewrites.List(h.kube.Actions(), h.client.Actions())); diff != "" {
		t.Fatalf("deleting VMI with a pod (-want +got):\n%s", diff)
	}

	h = newHarness(t, fakeRenderer{}, vmi.DeepCopy())
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if len(h.vmi(t).Finalizers) != 0 {
		t.Fatalf("finalizer kept after the pods are gone: %v", h.vmi(t).Finalizers)
	}
}

func TestFinalVMIPodsDeleted(t *testing.T) {
	vmi := newVMI(v1.Succeeded)
	h := newHarness(t, fakeRenderer{}, vmi.DeepCopy(), launcherPod(vmi, corev1.PodSucceeded, false, "node01"))
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got := fakewrites.List(h.kube.Actions())
	if len(got) != 1 || got[0] != "delete pods" {
		t.Fatalf("writes = %v", got)
	}
	if h.vmi(t).Status.Phase != v1.Succeeded {
		t.Fatal("a final phase must never change")
	}
}

// TestDirectVMIGetsFinalizerAndDefaults: a VMI created directly (no VM, no
// webhook) gets the finalizer and the spec defaults, among them the default
// pod interface, in the controller's first write, before its pod is
// rendered; a new VMI that opted out of the pod interface gets none, and one
// that is already defaulted is not written for it.
func TestDirectVMIGetsFinalizerAndDefaults(t *testing.T) {
	bare := func(finalizer bool, autoattach *bool) *v1.VirtualMachineInstance {
		vmi := &v1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Name: "vmi", Namespace: "ns", UID: "vmi-uid"},
		}
		if finalizer {
			vmi.Finalizers = []string{v1.VirtualMachineControllerFinalizer}
		}
		vmi.Spec.Domain.Devices.AutoattachPodInterface = autoattach
		return vmi
	}
	cases := []struct {
		name       string
		vmi        *v1.VirtualMachineInstance
		wantIfaces []v1.Interface
		wantWrites []string
	}{
		{"no finalizer, no interfaces", bare(false, nil),
			[]v1.Interface{{Name: "default", Model: "virtio", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}},
			[]string{"create pods", "update virtualmachineinstances", "update virtualmachineinstances"}},
		{"finalizer but no defaults", bare(true, nil),
			[]v1.Interface{{Name: "default", Model: "virtio", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}},
			[]string{"create pods", "update virtualmachineinstances", "update virtualmachineinstances"}},
		{"autoattachPodInterface false", bare(false, v1.BoolPtr(false)), nil,
			[]string{"create pods", "update virtualmachineinstances", "update virtualmachineinstances"}},
		{"already defaulted", newVMI(""),
			[]v1.Interface{{Name: "default", Model: "virtio", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}},
			[]string{"create pods", "update virtualmachineinstances"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rendered *v1.VirtualMachineInstance
			h := newHarness(t, renderFunc(func(vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
				rendered = vmi.DeepCopy()
				return fakeRenderer{}.RenderLaunchPod(vmi)
			}), tc.vmi)
			if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWrites, fakewrites.List(h.kube.Actions(), h.client.Actions())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			got := h.vmi(t)
			if len(got.Finalizers) != 1 || got.Finalizers[0] != v1.VirtualMachineControllerFinalizer {
				t.Errorf("finalizers = %v", got.Finalizers)
			}
			if diff := cmp.Diff(tc.wantIfaces, got.Spec.Domain.Devices.Interfaces); diff != "" {
				t.Errorf("stored interfaces (-want +got):\n%s", diff)
			}
			if tc.wantIfaces != nil && (len(got.Spec.Networks) != 1 || got.Spec.Networks[0].Pod == nil) {
				t.Errorf("stored networks %+v, want the default pod network", got.Spec.Networks)
			}
			if rendered == nil || !equality.Semantic.DeepEqual(rendered.Spec, got.Spec) {
				t.Errorf("the pod was rendered from a spec other than the stored one")
			}
		})
	}
}

type renderFunc func(*v1.VirtualMachineInstance) (*corev1.Pod, error)

func (f renderFunc) RenderLaunchPod(vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	return f(vmi)
}

// A VMI that no node could run (domainxml.Validate rejects it) gets no
// launcher pod: a Synchronized=False condition with reason InvalidSpec
// naming the field, and no retry.
func TestInvalidSpecGetsNoPod(t *testing.T) {
	h := newHarness(t, fakeRenderer{}, newVMI(""))
	h.c.validate = func(*v1.VirtualMachineInstance) field.ErrorList {
		return field.ErrorList{field.Invalid(field.NewPath("spec.domain.devices.disks[0].disk.bus"), "floppy", "unknown bus")}
	}
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatalf("an invalid spec is permanent and must not be retried: %v", err)
	}
	if pods, _ := h.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("an invalid VMI got %d launcher pods", len(pods.Items))
	}
	vmi := h.vmi(t)
	c := vmi.VMICondition(v1.VirtualMachineInstanceSynchronized)
	if vmi.Status.Phase != v1.Pending || c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonInvalidSpec ||
		!strings.Contains(c.Message, "spec.domain.devices.disks[0].disk.bus") {
		t.Fatalf("phase %q condition %+v", vmi.Status.Phase, c)
	}
}

// TestMigrationTargetPodIsNotTheVMIs: a running VMI with a live
// migration's target pod on another node follows the pod on its own node:
// the target's failure (or readiness) is not the VMI's, and both pods are
// active. Once the node agents move status.nodeName to the target's node,
// the source pod's exit is not a failure either.
func TestMigrationTargetPodIsNotTheVMIs(t *testing.T) {
	vmi := newVMI(v1.Running)
	vmi.Status.NodeName = "node01"
	vmi.Labels = map[string]string{v1.NodeNameLabel: "node01"}
	source := launcherPod(vmi, corev1.PodRunning, true, "node01")
	source.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	target := launcherPod(vmi, corev1.PodRunning, false, "node02")
	target.Name, target.UID, target.CreationTimestamp = "virt-launcher-vmi-target", "target-uid", metav1.NewTime(now)
	target.Labels[v1.MigrationJobLabel] = "migration-uid"

	h := newHarness(t, fakeRenderer{}, vmi.DeepCopy(), source, target)
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got := h.vmi(t)
	if got.Status.Phase != v1.Running || !hasReady(got) || len(got.Status.ActivePods) != 2 {
		t.Errorf("with a target pod not ready: phase %s ready %v active pods %v; want Running, ready, 2 pods", got.Status.Phase, hasReady(got), got.Status.ActivePods)
	}

	target.Status.Phase = corev1.PodFailed
	h = newHarness(t, fakeRenderer{}, vmi.DeepCopy(), source, target)
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if got := h.vmi(t); got.Status.Phase != v1.Running {
		t.Errorf("a failed migration target failed the VMI: phase %s reason %s", got.Status.Phase, got.Status.Reason)
	}

	// Switched over: the VMI runs on node02, the source launcher exited.
	target.Status.Phase = corev1.PodRunning
	target.Status.ContainerStatuses[0].Ready = true
	source.Status.Phase = corev1.PodSucceeded
	moved := vmi.DeepCopy()
	moved.Status.NodeName, moved.Labels[v1.NodeNameLabel] = "node02", "node02"
	h = newHarness(t, fakeRenderer{}, moved, source, target)
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got = h.vmi(t)
	if got.Status.Phase != v1.Running || !hasReady(got) || got.Status.ActivePods["target-uid"] != "node02" || len(got.Status.ActivePods) != 1 {
		t.Errorf("after the switch-over: phase %s ready %v active pods %v; want Running, ready, only the target", got.Status.Phase, hasReady(got), got.Status.ActivePods)
	}
}

func hasReady(vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestDirectVMIDefaultsFromKubeVirt: a VMI created directly gets the
// defaults the KubeVirt CR configures; while the CR holds a setting that
// cannot be applied it gets no pod, a Synchronized=False condition naming
// the CR's field, and a retry; once fixed, the next sync creates its pod.
func TestDirectVMIDefaultsFromKubeVirt(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vmi", Namespace: "ns", UID: "vmi-uid"}}
	h := newHarness(t, fakeRenderer{}, vmi)
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.Configuration.CPUModel = "Westmere"
	kv.Spec.Configuration.Network = &v1.NetworkConfiguration{DefaultNetworkInterface: "bridge", PermitBridgeInterfaceOnPodNetwork: v1.BoolPtr(false)}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(kv)
	h.c.kubevirts = store

	err := h.c.sync(context.Background(), "ns/vmi")
	if err == nil || !strings.Contains(err.Error(), "KubeVirt kubevirt/kubevirt: spec.configuration.network.defaultNetworkInterface: bridge is not permitted") {
		t.Fatalf("sync = %v, want an error naming the KubeVirt CR's field", err)
	}
	if pods, _ := h.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("%d pods created under a configuration that cannot be applied", len(pods.Items))
	}
	got := h.vmi(t)
	c := got.VMICondition(v1.VirtualMachineInstanceSynchronized)
	if got.Status.Phase != v1.Pending || c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonInvalidSpec ||
		!strings.Contains(c.Message, "spec.configuration.network.defaultNetworkInterface") {
		t.Fatalf("phase %q condition %+v", got.Status.Phase, c)
	}

	kv.Spec.Configuration.Network = &v1.NetworkConfiguration{DefaultNetworkInterface: "masquerade"}
	_ = store.Update(kv)
	got.ResourceVersion = "2" // a new version, as the informer would see
	_ = h.c.vmiIndexer.Update(got)
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if pods, _ := h.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 1 {
		t.Fatalf("%d pods after the configuration was fixed, want 1", len(pods.Items))
	}
	got = h.vmi(t)
	if got.Spec.Domain.CPU == nil || got.Spec.Domain.CPU.Model != "Westmere" {
		t.Errorf("cpu %+v, want the CR's Westmere", got.Spec.Domain.CPU)
	}
	if ifs := got.Spec.Domain.Devices.Interfaces; len(ifs) != 1 || ifs[0].Masquerade == nil {
		t.Errorf("interfaces %+v, want the CR's default masquerade", ifs)
	}
}
