package vm

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
	"github.com/vmkit/vmkit/vmcontrol/snapshot"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newVM(strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid", Generation: 2},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(strategy),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{}},
			},
		},
	}
}

func ownedVMI(phase v1.VirtualMachineInstancePhase, ran bool) *v1.VirtualMachineInstance {
	vm := newVM(v1.RunStrategyAlways)
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vmi-uid",
			OwnerReferences: []metav1.OwnerReference{controllerref.Ref(vm, v1.VirtualMachineGroupVersionKind)}},
		Status: v1.VirtualMachineInstanceStatus{Phase: phase},
	}
	if ran {
		vmi.Status.PhaseTransitionTimestamps = []v1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: v1.Running}}
	}
	return vmi
}

// harness runs one sync over listers filled with objects.
type harness struct {
	c      *Controller
	client *fake.Clientset
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	f := externalversions.NewSharedInformerFactory(client, 0)
	c, err := New(Config{Client: client.KubevirtV1(), VMs: f.Kubevirt().V1().VirtualMachines().Informer(), VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.VirtualMachine:
			_ = f.Kubevirt().V1().VirtualMachines().Informer().GetIndexer().Add(o)
		case *v1.VirtualMachineInstance:
			_ = f.Kubevirt().V1().VirtualMachineInstances().Informer().GetIndexer().Add(o)
		}
	}
	c.now = func() time.Time { return now }
	c.jitter = func() float64 { return 0 }
	client.ClearActions()
	return &harness{c: c, client: client}
}

// writes lists the verbs and resources the sync sent, e.g. "create virtualmachineinstances".
func (h *harness) writes() []string { return fakewrites.List(h.client.Actions()) }

func (h *harness) status(t *testing.T) v1.VirtualMachineStatus {
	t.Helper()
	vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vm.Status
}

func TestSyncRunStrategies(t *testing.T) {
	cases := []struct {
		name       string
		strategy   v1.VirtualMachineRunStrategy
		vmi        *v1.VirtualMachineInstance
		wantWrites []string
		wantStatus v1.VirtualMachinePrintableStatus
	}{
		{"always starts", v1.RunStrategyAlways, nil, []string{"create virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStarting},
		{"always keeps a running VMI", v1.RunStrategyAlways, ownedVMI(v1.Running, true), []string{"update virtualmachines/status"}, v1.VirtualMachineStatusRunning},
		{"always replaces a succeeded VMI", v1.RunStrategyAlways, ownedVMI(v1.Succeeded, true), []string{"delete virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStopped},
		{"rerun restarts a failed VMI", v1.RunStrategyRerunOnFailure, ownedVMI(v1.Failed, true), []string{"delete virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStopped},
		{"rerun removes a succeeded VMI", v1.RunStrategyRerunOnFailure, ownedVMI(v1.Succeeded, true), []string{"delete virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStopped},
		{"rerun starts a new VM", v1.RunStrategyRerunOnFailure, nil, []string{"create virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStarting},
		{"halted stops", v1.RunStrategyHalted, ownedVMI(v1.Running, true), []string{"delete virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusRunning},
		{"halted without VMI", v1.RunStrategyHalted, nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusStopped},
		{"manual does nothing", v1.RunStrategyManual, nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusStopped},
		{"once starts", v1.RunStrategyOnce, nil, []string{"create virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStarting},
		{"once never restarts", v1.RunStrategyOnce, ownedVMI(v1.Failed, true), []string{"update virtualmachines/status"}, v1.VirtualMachineStatusStopped},
		{"scheduling VMI shows Starting", v1.RunStrategyAlways, ownedVMI(v1.Scheduling, false), []string{"update virtualmachines/status"}, v1.VirtualMachineStatusStarting},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{newVM(tc.strategy)}
			if tc.vmi != nil {
				objs = append(objs, tc.vmi)
			}
			h := newHarness(t, objs...)
			if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWrites, h.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if got := h.status(t).PrintableStatus; got != tc.wantStatus {
				t.Errorf("printableStatus = %q, want %q", got, tc.wantStatus)
			}
		})
	}
}

func TestSyncCreatesVMIFromTemplate(t *testing.T) {
	h := newHarness(t, newVM(v1.RunStrategyAlways))
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(vmi)
	if ref == nil || ref.UID != "vm-uid" || ref.Kind != "VirtualMachine" || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref = %+v", ref)
	}
	if vmi.Labels["app"] != "x" || vmi.Labels[v1.VirtualMachineLabel] != "vm" {
		t.Errorf("labels = %v", vmi.Labels)
	}
	if vmi.Annotations[GenerationAnnotation] != "2" || vmi.Finalizers[0] != v1.VirtualMachineControllerFinalizer {
		t.Errorf("annotations %v finalizers %v", vmi.Annotations, vmi.Finalizers)
	}
	if ifs, nets := vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks; len(ifs) != 1 || ifs[0].Bridge == nil || ifs[0].Model != v1.DefaultInterfaceModel ||
		len(nets) != 1 || nets[0].Pod == nil || nets[0].Name != ifs[0].Name {
		t.Errorf("interfaces %+v networks %+v; want the default pod interface (bridge) stored in the VMI", ifs, nets)
	}
	// A template's reserved labels (only the components may set them on
	// a VMI) stay out of the VMI; its others are copied.
	labelled := newVM(v1.RunStrategyAlways)
	labelled.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "x", v1.NodeNameLabel: "node01", v1.MigrationJobLabel: "m"}
	if got, err := NewVMI(labelled); err != nil || got.Labels["app"] != "x" || got.Labels[v1.NodeNameLabel] != "" || got.Labels[v1.MigrationJobLabel] != "" {
		t.Errorf("VMI of a template with reserved labels: labels %v (%v), want app only", got.Labels, err)
	}
	again, _ := NewVMI(newVM(v1.RunStrategyAlways))
	if vmi.Spec.Domain.Firmware.UUID == "" || vmi.Spec.Domain.Firmware.UUID != again.Spec.Domain.Firmware.UUID {
		t.Errorf("firmware UUID %q is not stable (%q)", vmi.Spec.Domain.Firmware.UUID, again.Spec.Domain.Firmware.UUID)
	}
	// Expectations block a second create until the informer sees the first.
	h.client.ClearActions()
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	for _, w := range h.writes() {
		if w == "create virtualmachineinstances" {
			t.Fatal("second sync created another VMI before the first was observed")
		}
	}
}

func TestSyncStateChangeRequests(t *testing.T) {
	uid := types.UID("vmi-uid")
	cases := []struct {
		name       string
		requests   []v1.VirtualMachineStateChangeRequest
		vmi        *v1.VirtualMachineInstance
		wantWrite  string
		wantRemain int
	}{
		{"start request creates", []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest}}, nil, "create virtualmachineinstances", 0},
		{"stop request deletes", []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: &uid}}, ownedVMI(v1.Running, true), "delete virtualmachineinstances", 1},
		{"stop for another VMI is dropped", []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: ptr(types.UID("old"))}}, ownedVMI(v1.Running, true), "", 0},
		{"restart stops first", []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest}, {Action: v1.StartRequest}}, ownedVMI(v1.Running, true), "delete virtualmachineinstances", 2},
		{"restart then starts", []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest}, {Action: v1.StartRequest}}, nil, "create virtualmachineinstances", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(v1.RunStrategyManual)
			vm.Status.StateChangeRequests = tc.requests
			objs := []runtime.Object{vm}
			if tc.vmi != nil {
				objs = append(objs, tc.vmi)
			}
			h := newHarness(t, objs...)
			if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
				t.Fatal(err)
			}
			writes := h.writes()
			if tc.wantWrite != "" && (len(writes) == 0 || writes[0] != tc.wantWrite) {
				t.Errorf("writes = %v, want first %q", writes, tc.wantWrite)
			}
			if tc.wantWrite == "" && len(writes) > 0 && writes[0] != "update virtualmachines/status" {
				t.Errorf("writes = %v, want only a status update", writes)
			}
			if got := len(h.status(t).StateChangeRequests); got != tc.wantRemain {
				t.Errorf("%d requests remain, want %d", got, tc.wantRemain)
			}
		})
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	vm := newVM(v1.RunStrategyAlways)
	failed := ownedVMI(v1.Failed, false)
	h := newHarness(t, vm, failed)
	err := h.c.sync(context.Background(), "ns/vm")
	if err != nil {
		t.Fatal(err)
	}
	st := h.status(t)
	if st.StartFailure == nil || st.StartFailure.ConsecutiveFailCount != 1 || st.StartFailure.LastFailedVMIUID != "vmi-uid" {
		t.Fatalf("startFailure = %+v", st.StartFailure)
	}
	if st.StartFailure.RetryAfterTimestamp.Sub(now) != BackoffBase || st.PrintableStatus != v1.VirtualMachineStatusCrashLoopBackOff {
		t.Fatalf("retry after %v, status %q", st.StartFailure.RetryAfterTimestamp, st.PrintableStatus)
	}

	// The failed VMI is gone; within the back-off no new VMI is created.
	vm.Status = st
	h = newHarness(t, vm)
	if err := h.c.sync(context.Background(), "ns/vm"); err == nil || err.Error() != "requeue after 10s" {
		t.Fatalf("sync within back-off = %v, want a requeue after 10s", err)
	}
	for _, w := range h.writes() {
		if w == "create virtualmachineinstances" {
			t.Fatal("created a VMI during back-off")
		}
	}
	// After it, the VMI is created again (a fresh cache holds the written status).
	vm.Status = h.status(t)
	h = newHarness(t, vm)
	h.c.now = func() time.Time { return now.Add(11 * time.Second) }
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) == 0 || w[0] != "create virtualmachineinstances" {
		t.Fatalf("writes after back-off = %v", w)
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		n      int
		jitter float64
		want   time.Duration
	}{
		{1, 0, 10 * time.Second}, {2, 0, 20 * time.Second}, {3, 0, 40 * time.Second},
		{2, 0.5, 22 * time.Second}, {6, 0, 5 * time.Minute}, {40, 0.99, 5 * time.Minute},
	}
	for _, tc := range cases {
		if got := Backoff(tc.n, tc.jitter); got != tc.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", tc.n, tc.jitter, got, tc.want)
		}
	}
}

func TestUpdateStartFailure(t *testing.T) {
	prev := &v1.VirtualMachineStartFailure{ConsecutiveFailCount: 2, LastFailedVMIUID: "old"}
	zero := func() float64 { return 0 }
	if got := updateStartFailure(prev, ownedVMI(v1.Running, true), now, zero); got != nil {
		t.Errorf("a running VMI must clear the failures, got %+v", got)
	}
	if got := updateStartFailure(prev, ownedVMI(v1.Failed, false), now, zero); got.ConsecutiveFailCount != 3 || got.RetryAfterTimestamp.Sub(now) != 40*time.Second {
		t.Errorf("third failure = %+v", got)
	}
	if got := updateStartFailure(prev, ownedVMI(v1.Failed, true), now, zero); got != prev {
		t.Errorf("a VMI that ran and failed is not a start failure, got %+v", got)
	}
	same := &v1.VirtualMachineStartFailure{ConsecutiveFailCount: 1, LastFailedVMIUID: "vmi-uid"}
	if got := updateStartFailure(same, ownedVMI(v1.Failed, false), now, zero); got != same {
		t.Errorf("the same failed VMI must be counted once, got %+v", got)
	}
}

func TestForeignVMIIsReported(t *testing.T) {
	foreign := ownedVMI(v1.Running, true)
	foreign.OwnerReferences[0].UID = "someone-else"
	h := newHarness(t, newVM(v1.RunStrategyHalted), foreign)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update virtualmachines/status"}, h.writes()); diff != "" {
		t.Fatalf("must not touch another owner's VMI:\n%s", diff)
	}
	st := h.status(t)
	var failure *v1.VirtualMachineCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.VirtualMachineFailure {
			failure = &st.Conditions[i]
		}
	}
	if failure == nil || failure.Reason != ReasonVMIForeign || st.Created {
		t.Fatalf("conditions = %+v, created %v", st.Conditions, st.Created)
	}
}

func TestSyncWritesNothingWhenUnchanged(t *testing.T) {
	vm := newVM(v1.RunStrategyAlways)
	vmi := ownedVMI(v1.Running, true)
	vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
	h := newHarness(t, vm, vmi)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vm.Status = h.status(t)
	if !vm.Status.Ready || vm.Status.PrintableStatus != v1.VirtualMachineStatusRunning {
		t.Fatalf("status = %+v", vm.Status)
	}
	h = newHarness(t, vm, vmi)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) != 0 {
		t.Fatalf("unchanged VM caused writes %v", w)
	}
}

func TestOrphanVMIIsAdopted(t *testing.T) {
	orphan := ownedVMI(v1.Running, true)
	orphan.OwnerReferences = nil
	h := newHarness(t, newVM(v1.RunStrategyAlways), orphan)
	var patched bool
	h.client.PrependReactor("patch", "virtualmachineinstances", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patched = true
		return false, nil, nil
	})
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vmi, _ := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if !patched || metav1.GetControllerOf(vmi) == nil || metav1.GetControllerOf(vmi).UID != "vm-uid" {
		t.Fatalf("orphan not adopted: %+v", vmi.OwnerReferences)
	}
	if st := h.status(t); !st.Created || st.PrintableStatus != v1.VirtualMachineStatusRunning {
		t.Fatalf("status after adoption = %+v", st)
	}
}

func ptr[T any](v T) *T { return &v }

// A paused start of a halted VM (virt-api's start --paused): the controller
// first makes the VM run (Always), then starts the instance paused.
func TestSyncPausedStart(t *testing.T) {
	paused := []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest, Data: map[string]string{v1.StartRequestDataPausedKey: v1.StartRequestDataPausedTrue}}}
	vm := newVM(v1.RunStrategyHalted)
	vm.Status.StateChangeRequests = paused
	h := newHarness(t, vm)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"patch virtualmachines"}, h.writes()); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	got, _ := h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if s, _ := got.RunStrategy(); s != v1.RunStrategyAlways || len(got.Status.StateChangeRequests) != 1 {
		t.Fatalf("after the first sync: run strategy %s and %d requests, want Always and the request kept", s, len(got.Status.StateChangeRequests))
	}

	h = newHarness(t, got)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("second sync created no VMI: %v", err)
	}
	if vmi.Spec.StartStrategy == nil || *vmi.Spec.StartStrategy != v1.StartStrategyPaused {
		t.Errorf("VMI startStrategy = %v, want Paused", vmi.Spec.StartStrategy)
	}
}

// TestRerunOnFailureStopSticks (#43): a RerunOnFailure VM stopped by the
// user (its VMI gone, the stop request served) or whose guest shut down
// stays stopped; one whose VMI failed records a start request with the
// delete, and starts again once the VMI is gone.
func TestRerunOnFailureStopSticks(t *testing.T) {
	seen := func(vm *v1.VirtualMachine) *v1.VirtualMachine {
		vm.Status.RunStrategy = v1.RunStrategyRerunOnFailure // an earlier sync saw this strategy
		return vm
	}
	uid := types.UID("vmi-uid")

	// The user's stop: the request is served (the VMI deleted) ...
	vm := seen(newVM(v1.RunStrategyRerunOnFailure))
	vm.Status.StateChangeRequests = []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: &uid}}
	h := newHarness(t, vm, ownedVMI(v1.Running, true))
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"delete virtualmachineinstances", "update virtualmachines/status"}, h.writes()); diff != "" {
		t.Errorf("stop request (-want +got):\n%s", diff)
	}
	// ... and once the VMI is gone, nothing starts and the request is cleared.
	h = newHarness(t, vm)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update virtualmachines/status"}, h.writes()); diff != "" {
		t.Errorf("after the stop (-want +got):\n%s", diff)
	}
	st := h.status(t)
	if len(st.StateChangeRequests) != 0 || st.PrintableStatus != v1.VirtualMachineStatusStopped || st.RunStrategy != v1.RunStrategyRerunOnFailure {
		t.Errorf("after the stop: requests %v, printableStatus %s, runStrategy %s; want none, Stopped, RerunOnFailure", st.StateChangeRequests, st.PrintableStatus, st.RunStrategy)
	}

	// A failed VMI: deleted, with a start request for the next one ...
	h = newHarness(t, seen(newVM(v1.RunStrategyRerunOnFailure)), ownedVMI(v1.Failed, true))
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	st = h.status(t)
	if len(st.StateChangeRequests) != 1 || st.StateChangeRequests[0].Action != v1.StartRequest {
		t.Fatalf("failed VMI: requests %v, want one start request", st.StateChangeRequests)
	}
	// ... which starts it once the VMI is gone.
	failed := seen(newVM(v1.RunStrategyRerunOnFailure))
	failed.Status.StateChangeRequests = st.StateChangeRequests
	h = newHarness(t, failed)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"create virtualmachineinstances", "update virtualmachines/status"}, h.writes()); diff != "" {
		t.Errorf("after the failed VMI (-want +got):\n%s", diff)
	}
	if st := h.status(t); len(st.StateChangeRequests) != 0 {
		t.Errorf("after the restart: requests %v, want none", st.StateChangeRequests)
	}
}

// TestErrorStatuses (#43): the printableStatus KubeVirt derives from the
// instance's conditions and the VM's claims, in KubeVirt's order, and the
// instance's conditions copied onto the VM.
func TestErrorStatuses(t *testing.T) {
	pending := func(conds ...v1.VirtualMachineInstanceCondition) *v1.VirtualMachineInstance {
		vmi := ownedVMI(v1.Pending, false)
		vmi.Status.Conditions = conds
		return vmi
	}
	sync := func(reason string) v1.VirtualMachineInstanceCondition {
		return v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse, Reason: reason, Message: reason + " message"}
	}
	unschedulable := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}
	for _, tt := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		unbound bool
		want    v1.VirtualMachinePrintableStatus
	}{
		{"missing claim", pending(sync("FailedPvcNotFound")), false, v1.VirtualMachineStatusPvcNotFound},
		{"image pull", pending(sync("ErrImagePull")), false, v1.VirtualMachineStatusErrImagePull},
		{"image pull back-off", pending(sync("ImagePullBackOff")), false, v1.VirtualMachineStatusImagePullBackOff},
		{"no node fits", pending(unschedulable), false, v1.VirtualMachineStatusUnschedulable},
		{"a missing claim before scheduling", pending(unschedulable, sync("FailedPvcNotFound")), false, v1.VirtualMachineStatusPvcNotFound},
		{"a claim waiting for its consumer", pending(unschedulable), true, v1.VirtualMachineStatusWaitingForVolumeBinding},
		{"no instance yet, claim unbound", nil, true, v1.VirtualMachineStatusWaitingForVolumeBinding},
		{"just pending", pending(), false, v1.VirtualMachineStatusStarting},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vm := newVM(v1.RunStrategyAlways)
			st := state{now: now, strategy: v1.RunStrategyAlways, unboundClaim: tt.unbound}
			status := calculateStatus(vm, tt.vmi, st)
			if status.PrintableStatus != tt.want {
				t.Errorf("printableStatus %s, want %s", status.PrintableStatus, tt.want)
			}
			if tt.vmi == nil {
				return
			}
			for _, c := range tt.vmi.Status.Conditions {
				found := false
				for _, vc := range status.Conditions {
					if string(vc.Type) == string(c.Type) && vc.Status == c.Status && vc.Reason == c.Reason && vc.Message == c.Message {
						found = true
					}
				}
				if !found {
					t.Errorf("the VMI's condition %s=%s (%s) is not on the VM: %+v", c.Type, c.Status, c.Reason, status.Conditions)
				}
			}
		})
	}
}

func TestUnboundClaim(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for name, phase := range map[string]corev1.PersistentVolumeClaimPhase{"bound": corev1.ClaimBound, "waiting": corev1.ClaimPending} {
		_ = indexer.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}})
	}
	c := &Controller{claims: corelisters.NewPersistentVolumeClaimLister(indexer)}
	withClaim := func(claim string, dv bool) *v1.VirtualMachine {
		vm := newVM(v1.RunStrategyAlways)
		src := v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
		if dv {
			src = v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: claim}}
		}
		vm.Spec.Template.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: src}}
		return vm
	}
	for _, tt := range []struct {
		vm   *v1.VirtualMachine
		want bool
	}{
		{withClaim("bound", false), false},
		{withClaim("waiting", false), true},
		{withClaim("waiting", true), true},
		{withClaim("missing", false), false}, // ErrorPvcNotFound, from the VMI
		{newVM(v1.RunStrategyAlways), false},
	} {
		if got := c.unboundClaim(tt.vm); got != tt.want {
			t.Errorf("unboundClaim(%+v) = %v, want %v", tt.vm.Spec.Template.Spec.Volumes, got, tt.want)
		}
	}
	if (&Controller{}).unboundClaim(withClaim("waiting", false)) {
		t.Error("without a claim informer: true, want false")
	}
}

// TestDeletedVMFinalizer (#43): a deleted VM holding the controller's
// finalizer and another one loses its instance first, then the controller's
// finalizer only, with a patch that tests the list it replaces.
func TestDeletedVMFinalizer(t *testing.T) {
	deleted := func() *v1.VirtualMachine {
		vm := newVM(v1.RunStrategyAlways)
		ts := metav1.NewTime(now)
		vm.DeletionTimestamp = &ts
		vm.Finalizers = []string{"example.com/keep", v1.VirtualMachineControllerFinalizer}
		return vm
	}
	h := newHarness(t, deleted(), ownedVMI(v1.Running, true))
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) == 0 || w[0] != "delete virtualmachineinstances" {
		t.Fatalf("with its instance: writes %v, want the instance deleted first", w)
	}

	h = newHarness(t, deleted())
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	var patch []byte
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetResource().Resource == "virtualmachines" {
			patch = p.GetPatch()
		}
	}
	want := `[{"op":"test","path":"/metadata/finalizers","value":["example.com/keep","kubevirt.io/virtualMachineControllerFinalize"]},{"op":"replace","path":"/metadata/finalizers","value":["example.com/keep"]}]`
	if string(patch) != want {
		t.Errorf("finalizer patch %s, want %s", patch, want)
	}
}

// TestFirstStatusCarriesSnapshotStatuses: with claims watched, the status
// write of the sync that starts a VM carries its volumeSnapshotStatuses
// (the snapshot controller's computation), so no write of their own
// follows.
func TestFirstStatusCarriesSnapshotStatuses(t *testing.T) {
	vm := newVM(v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}
	h := newHarness(t, vm)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	h.c.claims = corelisters.NewPersistentVolumeClaimLister(indexer)
	if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vm, _ = h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	want := snapshot.VolumeSnapshotStatuses(vm, func(string) *corev1.PersistentVolumeClaim { return nil })
	if len(want) != 1 || want[0].Reason != "PVC not found" {
		t.Fatalf("the snapshot controller's statuses for the test VM: %+v", want)
	}
	if diff := cmp.Diff(want, vm.Status.VolumeSnapshotStatuses); diff != "" {
		t.Errorf("volumeSnapshotStatuses (-want +got):\n%s", diff)
	}
	if got := h.writes(); !slices.Equal(got, []string{"create virtualmachineinstances", "update virtualmachines/status"}) {
		t.Errorf("writes %v, want the VMI's create and one status update", got)
	}
}
