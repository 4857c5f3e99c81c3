package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
)

var now = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func newRS(replicas int32) *v1.VirtualMachineInstanceReplicaSet {
	return &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "rs-uid"},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}},
		},
	}
}

// vmi is an owned VMI of rs with the given phase, readiness and age.
func vmi(name string, phase v1.VirtualMachineInstancePhase, isReady bool, age time.Duration) *v1.VirtualMachineInstance {
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "x"},
			CreationTimestamp: metav1.NewTime(now.Add(-age)),
			OwnerReferences:   []metav1.OwnerReference{controllerref.Ref(newRS(0), v1.VirtualMachineInstanceReplicaSetGroupVersionKind)}},
		Status: v1.VirtualMachineInstanceStatus{Phase: phase},
	}
	if isReady {
		v.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
	}
	return v
}

type harness struct {
	c      *Controller
	client *fake.Clientset
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	f := externalversions.NewSharedInformerFactory(client, 0)
	c, err := New(Config{Client: client.KubevirtV1(), ReplicaSets: f.Kubevirt().V1().VirtualMachineInstanceReplicaSets().Informer(),
		VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.VirtualMachineInstanceReplicaSet:
			_ = f.Kubevirt().V1().VirtualMachineInstanceReplicaSets().Informer().GetIndexer().Add(o)
		case *v1.VirtualMachineInstance:
			_ = f.Kubevirt().V1().VirtualMachineInstances().Informer().GetIndexer().Add(o)
		}
	}
	// The fake clientset does not implement generateName.
	var names atomic.Int32
	client.PrependReactor("create", "virtualmachineinstances", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v, ok := a.(k8stesting.CreateAction).GetObject().(*v1.VirtualMachineInstance); ok && v.Name == "" {
			v.Name = fmt.Sprintf("%s%05d", v.GenerateName, names.Add(1))
		}
		return false, nil, nil
	})
	c.now = func() time.Time { return now }
	client.ClearActions()
	return &harness{c: c, client: client}
}

func (h *harness) rs(t *testing.T) *v1.VirtualMachineInstanceReplicaSet {
	t.Helper()
	rs, err := h.client.KubevirtV1().VirtualMachineInstanceReplicaSets("ns").Get(context.Background(), "rs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// deleted lists the names of the VMIs the sync deleted, in order.
func (h *harness) deleted() []string {
	var out []string
	for _, a := range h.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && d.GetResource().Resource == "virtualmachineinstances" {
			out = append(out, d.GetName())
		}
	}
	return out
}

func (h *harness) created() int {
	n := 0
	for _, w := range fakewrites.List(h.client.Actions()) {
		if w == "create virtualmachineinstances" {
			n++
		}
	}
	return n
}

func TestSyncScales(t *testing.T) {
	cases := []struct {
		name        string
		replicas    int32
		vmis        []*v1.VirtualMachineInstance
		wantCreated int
		wantDeleted []string
		wantStatus  v1.VirtualMachineInstanceReplicaSetStatus
	}{{
		name: "from zero: creates all", replicas: 3, wantCreated: 3,
		wantStatus: v1.VirtualMachineInstanceReplicaSetStatus{LabelSelector: "app=x"},
	}, {
		name: "steady", replicas: 2,
		vmis:       []*v1.VirtualMachineInstance{vmi("a", v1.Running, true, time.Hour), vmi("b", v1.Running, false, time.Minute)},
		wantStatus: v1.VirtualMachineInstanceReplicaSetStatus{Replicas: 2, ReadyReplicas: 1, LabelSelector: "app=x"},
	}, {
		name: "scale down: unscheduled, scheduling, not ready, then the youngest ready", replicas: 1,
		vmis: []*v1.VirtualMachineInstance{
			vmi("old-ready", v1.Running, true, 3*time.Hour),
			vmi("young-ready", v1.Running, true, time.Minute),
			vmi("not-ready", v1.Running, false, 2*time.Hour),
			vmi("scheduling", v1.Scheduling, false, 4*time.Hour),
			vmi("pending", v1.Pending, false, 5*time.Hour),
		},
		wantDeleted: []string{"pending", "scheduling", "not-ready", "young-ready"},
		wantStatus:  v1.VirtualMachineInstanceReplicaSetStatus{Replicas: 5, ReadyReplicas: 2, LabelSelector: "app=x"},
	}, {
		name: "finished VMIs are deleted and replaced", replicas: 2,
		vmis:        []*v1.VirtualMachineInstance{vmi("ok", v1.Running, true, time.Hour), vmi("done", v1.Succeeded, false, time.Hour)},
		wantDeleted: []string{"done"}, wantCreated: 1,
		wantStatus: v1.VirtualMachineInstanceReplicaSetStatus{Replicas: 1, ReadyReplicas: 1, LabelSelector: "app=x"},
	}, {
		name: "to zero", replicas: 0,
		vmis:        []*v1.VirtualMachineInstance{vmi("a", v1.Running, true, time.Hour)},
		wantDeleted: []string{"a"},
		wantStatus:  v1.VirtualMachineInstanceReplicaSetStatus{Replicas: 1, ReadyReplicas: 1, LabelSelector: "app=x"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{newRS(tc.replicas)}
			for _, v := range tc.vmis {
				objs = append(objs, v)
			}
			h := newHarness(t, objs...)
			if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
				t.Fatal(err)
			}
			if got := h.created(); got != tc.wantCreated {
				t.Errorf("created %d VMIs, want %d", got, tc.wantCreated)
			}
			if diff := cmp.Diff(tc.wantDeleted, h.deleted()); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStatus, h.rs(t).Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			// Expectations hold a second sync until the informer saw the writes.
			h.client.ClearActions()
			if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
				t.Fatal(err)
			}
			if (tc.wantCreated > 0 || len(tc.wantDeleted) > 0) && (h.created() > 0 || len(h.deleted()) > 0) {
				t.Errorf("a second sync acted before the first one's writes were observed: %v", fakewrites.List(h.client.Actions()))
			}
		})
	}
}

// Creations go out in slow-start batches and stop at the first failing
// batch: with every create failing, a sync sends exactly one.
func TestSlowStartStopsAtFirstError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failAfter int // creates that succeed before they start failing
		want      int // create requests sent
	}{
		{"all fail: one request", 0, 1},
		{"second fails: 1 + 2", 1, 3},
		{"fourth fails: 1 + 2 + 4", 3, 7},
		{"none fails: all 10", 100, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newRS(10))
			var sent atomic.Int32
			h.client.PrependReactor("create", "virtualmachineinstances", func(k8stesting.Action) (bool, runtime.Object, error) {
				if int(sent.Add(1)) > tc.failAfter {
					return true, nil, apierrors.NewInternalError(errors.New("etcd is tired"))
				}
				return false, nil, nil
			})
			err := h.c.sync(context.Background(), "ns/rs")
			if int(sent.Load()) != tc.want {
				t.Errorf("sent %d creates, want %d", sent.Load(), tc.want)
			}
			rs := h.rs(t)
			c := condition(rs, v1.VirtualMachineInstanceReplicaSetReplicaFailure)
			if tc.failAfter < 10 {
				if err == nil || c == nil || c.Reason != ReasonFailedCreate || c.Status != corev1.ConditionTrue {
					t.Errorf("err %v, ReplicaFailure %+v; want an error and ReplicaFailure FailedCreate", err, c)
				}
			} else if err != nil || c != nil {
				t.Errorf("err %v, ReplicaFailure %+v; want neither", err, c)
			}
		})
	}
}

func TestPausedAndInvalid(t *testing.T) {
	rs := newRS(3)
	rs.Spec.Paused = true
	h := newHarness(t, rs, vmi("a", v1.Running, true, time.Hour))
	if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	if h.created() != 0 || len(h.deleted()) != 0 {
		t.Errorf("a paused replica set wrote %v", fakewrites.List(h.client.Actions()))
	}
	if c := condition(h.rs(t), v1.VirtualMachineInstanceReplicaSetReplicaPaused); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("ReplicaPaused = %+v", c)
	}

	bad := newRS(1)
	bad.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "y"}
	h = newHarness(t, bad)
	if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	if c := condition(h.rs(t), v1.VirtualMachineInstanceReplicaSetReplicaFailure); h.created() != 0 || c == nil || c.Reason != ReasonFailedCreate {
		t.Errorf("selector not matching the template: created %d, ReplicaFailure %+v", h.created(), c)
	}

	empty := newRS(1)
	empty.Spec.Selector = &metav1.LabelSelector{}
	h = newHarness(t, empty)
	if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	if c := condition(h.rs(t), v1.VirtualMachineInstanceReplicaSetReplicaFailure); h.created() != 0 || c == nil || c.Reason != ReasonInvalidSelector {
		t.Errorf("empty selector: created %d, ReplicaFailure %+v", h.created(), c)
	}
}

// Orphans that match are adopted (and count), owned VMIs that stop
// matching are released, other controllers' VMIs are left alone.
func TestAdoptAndRelease(t *testing.T) {
	orphan := vmi("orphan", v1.Running, true, time.Hour)
	orphan.OwnerReferences = nil
	stray := vmi("stray", v1.Running, true, time.Hour)
	stray.Labels = map[string]string{"app": "other"}
	foreign := vmi("foreign", v1.Running, true, time.Hour)
	foreign.OwnerReferences[0].UID = "someone-else"
	h := newHarness(t, newRS(1), orphan, stray, foreign)
	if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	var patched []string
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patched = append(patched, p.GetName())
		}
	}
	slices.Sort(patched)
	if diff := cmp.Diff([]string{"orphan", "stray"}, patched); diff != "" {
		t.Errorf("patched (-want +got):\n%s", diff)
	}
	if h.created() != 0 || len(h.deleted()) != 0 {
		t.Errorf("with the orphan adopted nothing is missing: %v", fakewrites.List(h.client.Actions()))
	}
	got, _ := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "orphan", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != "rs-uid" {
		t.Errorf("orphan's controller = %+v", ref)
	}
	got, _ = h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "stray", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref != nil {
		t.Errorf("stray still controlled by %+v", ref)
	}
}

func TestNewVMI(t *testing.T) {
	rs := newRS(1)
	v, err := NewVMI(rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.GenerateName != "rs" || v.Labels["app"] != "x" || metav1.GetControllerOf(v).UID != "rs-uid" {
		t.Errorf("NewVMI = %+v", v.ObjectMeta)
	}
	if len(v.Spec.Domain.Devices.Interfaces) != 1 || v.Spec.TerminationGracePeriodSeconds == nil {
		t.Errorf("spec defaults not filled in: %+v", v.Spec)
	}
	// A template's reserved labels stay out of the VMI; a selector that
	// needs one matches no VMI it could create.
	rs.Spec.Template.ObjectMeta.Labels[v1.NodeNameLabel] = "node01"
	if v, err := NewVMI(rs, nil); err != nil || v.Labels[v1.NodeNameLabel] != "" || v.Labels["app"] != "x" {
		t.Errorf("VMI of a template with a reserved label: %v, %v; want app=x only", v.Labels, err)
	}
	rs.Spec.Selector.MatchLabels[v1.NodeNameLabel] = "node01"
	if _, err := NewVMI(rs, nil); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("a selector on a reserved label: %v, want an error", err)
	}
	rs.Spec.Template = nil
	if _, err := NewVMI(rs, nil); err == nil {
		t.Error("no template: want an error")
	}
}

// A VMI event enqueues its controller, or the matching replica sets of an
// orphan.
func TestVMIEventsEnqueue(t *testing.T) {
	other := newRS(1)
	other.Name, other.UID = "other", "other-uid"
	other.Spec.Selector.MatchLabels = map[string]string{"app": "nope"}
	h := newHarness(t, newRS(1), other)
	orphan := vmi("orphan", v1.Running, true, time.Hour)
	orphan.OwnerReferences = nil
	h.c.vmiChanged(orphan, true, false)
	h.c.vmiChanged(vmi("owned", v1.Running, true, time.Hour), true, false)
	var keys []string
	for h.c.loop.Queue.Len() > 0 {
		k, _ := h.c.loop.Queue.Get()
		keys = append(keys, k)
		h.c.loop.Queue.Done(k)
	}
	if diff := cmp.Diff([]string{"ns/rs"}, keys); diff != "" {
		t.Errorf("queued keys (-want +got):\n%s", diff)
	}
}

// TestSyncRetriesKubeVirtConfiguration: a KubeVirt CR setting the replica
// set's VMIs cannot take creates none, reports a ReplicaFailure naming the
// CR's field, and fails the sync so that it is retried (an edit of the CR
// enqueues no replica set); once fixed, the VMIs are created.
func TestSyncRetriesKubeVirtConfiguration(t *testing.T) {
	h := newHarness(t, newRS(1))
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.Configuration.Network = &v1.NetworkConfiguration{DefaultNetworkInterface: "carrier-pigeon"}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(kv)
	h.c.kubevirts = store
	err := h.c.sync(context.Background(), "ns/rs")
	if err == nil || !strings.Contains(err.Error(), "KubeVirt kubevirt/kubevirt: spec.configuration.network.defaultNetworkInterface") {
		t.Fatalf("sync = %v, want an error naming the KubeVirt CR's field, to be retried", err)
	}
	if n := h.created(); n != 0 {
		t.Fatalf("%d VMIs created under a configuration that cannot be applied", n)
	}
	if failure := condition(h.rs(t), v1.VirtualMachineInstanceReplicaSetReplicaFailure); failure == nil || !strings.Contains(failure.Message, "defaultNetworkInterface") {
		t.Errorf("ReplicaFailure condition %+v, want one naming the CR's field", failure)
	}
	kv.Spec.Configuration.Network = nil
	_ = store.Update(kv)
	h.c.stale.Forget("ns/rs")
	if err := h.c.sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	if n := h.created(); n != 1 {
		t.Errorf("%d VMIs created after the configuration was fixed, want 1", n)
	}
}
