package pool

import (
	"context"
	"errors"
	"slices"
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

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
)

var now = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func newPool(replicas int32) *poolv1beta1.VirtualMachinePool {
	halted := v1.RunStrategyHalted
	return &poolv1beta1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"},
		Spec: poolv1beta1.VirtualMachinePoolSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			VirtualMachineTemplate: &poolv1beta1.VirtualMachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       v1.VirtualMachineSpec{RunStrategy: &halted, Template: &v1.VirtualMachineInstanceTemplateSpec{}},
			},
		},
	}
}

// state is how far a test VM got.
type state int

const (
	stopped  state = iota // no instance
	starting              // an instance, not running
	running               // running, not ready
	isReady               // Ready
)

// vm is an owned VM of the pool with the given name, state and age.
func vm(name string, s state, age time.Duration) *v1.VirtualMachine {
	v := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "x"},
			CreationTimestamp: metav1.NewTime(now.Add(-age)),
			OwnerReferences:   []metav1.OwnerReference{controllerref.Ref(newPool(0), poolv1beta1.VirtualMachinePoolGroupVersionKind)}},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{}},
	}
	v.Status.Created = s >= starting
	if s >= running {
		v.Status.PrintableStatus = v1.VirtualMachineStatusRunning
	}
	if s == isReady {
		v.Status.Ready = true
		v.Status.Conditions = []v1.VirtualMachineCondition{{Type: v1.VirtualMachineReady, Status: corev1.ConditionTrue}}
	}
	return v
}

type harness struct {
	c      *Controller
	client *fake.Clientset
}

func newHarness(t testing.TB, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	f := externalversions.NewSharedInformerFactory(client, 0)
	pools, vms := f.Pool().V1beta1().VirtualMachinePools().Informer(), f.Kubevirt().V1().VirtualMachines().Informer()
	c, err := New(Config{Client: client.KubevirtV1(), PoolClient: client.PoolV1beta1(), Pools: pools, VMs: vms})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *poolv1beta1.VirtualMachinePool:
			_ = pools.GetIndexer().Add(o)
		case *v1.VirtualMachine:
			_ = vms.GetIndexer().Add(o)
		}
	}
	c.now = func() time.Time { return now }
	c.shuffle = func(int, func(i, j int)) {} // "Random" keeps the list order
	client.ClearActions()
	return &harness{c: c, client: client}
}

func (h *harness) pool(t *testing.T) *poolv1beta1.VirtualMachinePool {
	t.Helper()
	p, err := h.client.PoolV1beta1().VirtualMachinePools("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deleted lists the names of the VMs the sync deleted, in order.
func (h *harness) deleted() []string {
	var out []string
	for _, a := range h.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && d.GetResource().Resource == "virtualmachines" {
			out = append(out, d.GetName())
		}
	}
	return out
}

// created lists the names of the VMs the sync created, sorted.
func (h *harness) created() []string {
	var out []string
	for _, a := range h.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && c.GetResource().Resource == "virtualmachines" {
			out = append(out, c.GetObject().(*v1.VirtualMachine).Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestIndexOf(t *testing.T) {
	for _, tc := range []struct {
		pool, vm string
		want     int
		ok       bool
	}{
		{"web", "web-0", 0, true},
		{"web", "web-12", 12, true},
		{"web", "web-", 0, false},
		{"web", "web-01", 0, false},
		{"web", "web-1-0", 0, false}, // pool web-1's
		{"web-1", "web-1-0", 0, true},
		{"web", "web-x", 0, false},
		{"web", "webs-1", 0, false},
		{"web", "web", 0, false},
	} {
		got, ok := IndexOf(tc.pool, tc.vm)
		if got != tc.want || ok != tc.ok {
			t.Errorf("IndexOf(%q, %q) = %d, %v; want %d, %v", tc.pool, tc.vm, got, ok, tc.want, tc.ok)
		}
		if ok && VMName(tc.pool, got) != tc.vm {
			t.Errorf("VMName(%q, %d) = %q, want %q", tc.pool, got, VMName(tc.pool, got), tc.vm)
		}
	}
}

func TestFreeIndexes(t *testing.T) {
	named := func(names ...string) []*v1.VirtualMachine {
		var out []*v1.VirtualMachine
		for _, n := range names {
			out = append(out, &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		vms  []*v1.VirtualMachine
		n    int
		want []int
	}{
		{"empty namespace", nil, 3, []int{0, 1, 2}},
		{"gaps first", named("p-0", "p-2", "p-5"), 3, []int{1, 3, 4}},
		{"other names do not count", named("p", "q-0", "p-01", "p-0-1"), 2, []int{0, 1}},
		{"none", named("p-0"), 0, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FreeIndexes("p", tc.vms, tc.n)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestIndexedSpec(t *testing.T) {
	yes, no := true, false
	tmpl := func() *poolv1beta1.VirtualMachineTemplateSpec {
		return &poolv1beta1.VirtualMachineTemplateSpec{Spec: v1.VirtualMachineSpec{
			DataVolumeTemplates: []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root"}}, {ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
				{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "root"}}},
				{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
				{Name: "shared", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}},
				{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
				{Name: "ci", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "nd"}}}},
				{Name: "cd", VolumeSource: v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "cdud"}}}},
				{Name: "sp", VolumeSource: v1.VolumeSource{Sysprep: &v1.SysprepSource{ConfigMap: &corev1.LocalObjectReference{Name: "unattend"}}}},
			}}},
		}}
	}
	// names lists the DataVolume templates' names, then each volume's reference.
	names := func(s v1.VirtualMachineSpec) []string {
		var out []string
		for _, dv := range s.DataVolumeTemplates {
			out = append(out, dv.ObjectMeta.Name)
		}
		for _, v := range s.Template.Spec.Volumes {
			switch {
			case v.DataVolume != nil:
				out = append(out, v.DataVolume.Name)
			case v.PersistentVolumeClaim != nil:
				out = append(out, v.PersistentVolumeClaim.ClaimName)
			case v.ConfigMap != nil:
				out = append(out, v.ConfigMap.Name)
			case v.Secret != nil:
				out = append(out, v.Secret.SecretName)
			case v.CloudInitNoCloud != nil:
				out = append(out, v.CloudInitNoCloud.UserDataSecretRef.Name, v.CloudInitNoCloud.NetworkDataSecretRef.Name)
			case v.CloudInitConfigDrive != nil:
				out = append(out, v.CloudInitConfigDrive.UserDataSecretRef.Name)
			case v.Sysprep != nil:
				out = append(out, v.Sysprep.ConfigMap.Name)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		gen  *poolv1beta1.VirtualMachinePoolNameGeneration
		want []string
	}{
		{"data volumes only: claims not from a template keep their names", nil,
			[]string{"root-3", "data-3", "root-3", "data-3", "shared", "cfg", "sec", "ud", "nd", "cdud", "unattend"}},
		{"config maps too", &poolv1beta1.VirtualMachinePoolNameGeneration{AppendIndexToConfigMapRefs: &yes, AppendIndexToSecretRefs: &no},
			[]string{"root-3", "data-3", "root-3", "data-3", "shared", "cfg-3", "sec", "ud", "nd", "cdud", "unattend-3"}},
		{"secrets too", &poolv1beta1.VirtualMachinePoolNameGeneration{AppendIndexToSecretRefs: &yes},
			[]string{"root-3", "data-3", "root-3", "data-3", "shared", "cfg", "sec-3", "ud-3", "nd-3", "cdud-3", "unattend"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &poolv1beta1.VirtualMachinePoolSpec{VirtualMachineTemplate: tmpl(), NameGeneration: tc.gen}
			got := IndexedSpec(spec, 3)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(names(tmpl().Spec), names(spec.VirtualMachineTemplate.Spec)); diff != "" {
				t.Errorf("IndexedSpec changed the pool's template:\n%s", diff)
			}
		})
	}
}

func TestScaleInOrder(t *testing.T) {
	vms := []*v1.VirtualMachine{
		vm("pool-0", isReady, 5*time.Hour), vm("pool-1", isReady, time.Hour), vm("pool-2", running, time.Hour),
		vm("pool-3", starting, time.Hour), vm("pool-4", stopped, time.Hour), vm("pool-5", isReady, 9*time.Hour), vm("pool-6", stopped, time.Hour),
	}
	slices.SortStableFunc(vms, func(a, b *v1.VirtualMachine) int { return scaleInOrder("pool", a, b) })
	var got []string
	for _, v := range vms {
		got = append(got, v.Name)
	}
	want := []string{"pool-6", "pool-4", "pool-3", "pool-2", "pool-5", "pool-1", "pool-0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deletion order (-want +got):\n%s", diff)
	}
}

func TestSyncScales(t *testing.T) {
	sortPolicy := func(p poolv1beta1.VirtualMachinePoolSortPolicy) *poolv1beta1.VirtualMachinePoolScaleInStrategy {
		return &poolv1beta1.VirtualMachinePoolScaleInStrategy{Proactive: &poolv1beta1.VirtualMachinePoolProactiveScaleInStrategy{
			SelectionPolicy: &poolv1beta1.VirtualMachinePoolSelectionPolicy{SortPolicy: &p}}}
	}
	foreign := vm("pool-1", isReady, time.Hour)
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Other", Name: "o", UID: "other", Controller: new(bool)}}
	*foreign.OwnerReferences[0].Controller = true
	spare := vm("pool-1", isReady, 2*time.Hour)
	spare.Spec.Template.ObjectMeta.Labels = map[string]string{"tier": "spare"}
	three := []*v1.VirtualMachine{vm("pool-0", isReady, 3*time.Hour), spare, vm("pool-2", isReady, time.Hour)}
	cases := []struct {
		name        string
		replicas    int32
		scaleIn     *poolv1beta1.VirtualMachinePoolScaleInStrategy
		vms         []*v1.VirtualMachine
		wantCreated []string
		wantDeleted []string
		wantStatus  poolv1beta1.VirtualMachinePoolStatus
	}{{
		name: "from zero: <pool>-0 … <pool>-2", replicas: 3, wantCreated: []string{"pool-0", "pool-1", "pool-2"},
		wantStatus: poolv1beta1.VirtualMachinePoolStatus{LabelSelector: "app=x"},
	}, {
		name: "fills the lowest free indexes", replicas: 4,
		vms:         []*v1.VirtualMachine{vm("pool-0", isReady, time.Hour), vm("pool-3", isReady, time.Hour)},
		wantCreated: []string{"pool-1", "pool-2"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 2, ReadyReplicas: 2, LabelSelector: "app=x"},
	}, {
		name: "skips a name another controller's VM holds", replicas: 2,
		vms:         []*v1.VirtualMachine{vm("pool-0", running, time.Hour), foreign},
		wantCreated: []string{"pool-2"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 1, LabelSelector: "app=x"},
	}, {
		name: "steady", replicas: 2,
		vms:        []*v1.VirtualMachine{vm("pool-0", isReady, time.Hour), vm("pool-1", starting, time.Minute)},
		wantStatus: poolv1beta1.VirtualMachinePoolStatus{Replicas: 2, ReadyReplicas: 1, LabelSelector: "app=x"},
	}, {
		name: "scale down: least progressed first, then the highest index", replicas: 2,
		vms: []*v1.VirtualMachine{
			vm("pool-0", isReady, time.Hour), vm("pool-1", stopped, 3*time.Hour), vm("pool-2", isReady, 2*time.Hour),
			vm("pool-3", running, time.Hour), vm("pool-4", isReady, time.Minute),
		},
		wantDeleted: []string{"pool-1", "pool-3", "pool-4"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 5, ReadyReplicas: 3, LabelSelector: "app=x"},
	}, {
		name: "to zero", replicas: 0, vms: []*v1.VirtualMachine{vm("pool-0", isReady, time.Hour)},
		wantDeleted: []string{"pool-0"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 1, ReadyReplicas: 1, LabelSelector: "app=x"},
	}, {
		name: "sort policy AscendingOrder", replicas: 1, scaleIn: sortPolicy(poolv1beta1.VirtualMachinePoolSortPolicyAscendingOrder), vms: three,
		wantDeleted: []string{"pool-0", "pool-1"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 3, ReadyReplicas: 3, LabelSelector: "app=x"},
	}, {
		name: "sort policy Oldest", replicas: 2, scaleIn: sortPolicy(poolv1beta1.VirtualMachinePoolSortPolicyOldest), vms: three,
		wantDeleted: []string{"pool-0"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 3, ReadyReplicas: 3, LabelSelector: "app=x"},
	}, {
		name: "sort policy Newest", replicas: 2, scaleIn: sortPolicy(poolv1beta1.VirtualMachinePoolSortPolicyNewest), vms: three,
		wantDeleted: []string{"pool-2"},
		wantStatus:  poolv1beta1.VirtualMachinePoolStatus{Replicas: 3, ReadyReplicas: 3, LabelSelector: "app=x"},
	}, {
		name: "selectors limit what goes", replicas: 0,
		scaleIn: &poolv1beta1.VirtualMachinePoolScaleInStrategy{Proactive: &poolv1beta1.VirtualMachinePoolProactiveScaleInStrategy{
			SelectionPolicy: &poolv1beta1.VirtualMachinePoolSelectionPolicy{Selectors: &poolv1beta1.VirtualMachinePoolSelectors{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "spare"}}}}}},
		vms: three, wantDeleted: []string{"pool-1"},
		wantStatus: poolv1beta1.VirtualMachinePoolStatus{Replicas: 3, ReadyReplicas: 3, LabelSelector: "app=x"},
	}, {
		name: "unmanaged scale-in deletes nothing", replicas: 1,
		scaleIn: &poolv1beta1.VirtualMachinePoolScaleInStrategy{Unmanaged: &poolv1beta1.VirtualMachinePoolUnmanagedStrategy{}}, vms: three,
		wantStatus: poolv1beta1.VirtualMachinePoolStatus{Replicas: 3, ReadyReplicas: 3, LabelSelector: "app=x"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(tc.replicas)
			p.Spec.ScaleInStrategy = tc.scaleIn
			objs := []runtime.Object{p}
			for _, v := range tc.vms {
				objs = append(objs, v.DeepCopy())
			}
			h := newHarness(t, objs...)
			if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCreated, h.created()); diff != "" {
				t.Errorf("created (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDeleted, h.deleted()); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStatus, h.pool(t).Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			// Expectations hold a second sync until the informer saw the writes.
			h.client.ClearActions()
			if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
				t.Fatal(err)
			}
			if (len(tc.wantCreated) > 0 || len(tc.wantDeleted) > 0) && (len(h.created()) > 0 || len(h.deleted()) > 0) {
				t.Errorf("a second sync acted before the first one's writes were observed: %v", fakewrites.List(h.client.Actions()))
			}
		})
	}
}

// The VMs a pool creates: name, labels, owner, and their own volumes.
func TestCreatedVM(t *testing.T) {
	p := newPool(1)
	p.Spec.VirtualMachineTemplate.ObjectMeta.Annotations = map[string]string{"note": "hi"}
	p.Spec.VirtualMachineTemplate.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root"}}}
	h := newHarness(t, p)
	if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
		t.Fatal(err)
	}
	got, err := h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "pool-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(got)
	if ref == nil || ref.UID != "pool-uid" || ref.Kind != "VirtualMachinePool" || ref.APIVersion != "pool.kubevirt.io/v1beta1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference %+v", ref)
	}
	if got.Labels["app"] != "x" || got.Annotations["note"] != "hi" || got.Spec.DataVolumeTemplates[0].ObjectMeta.Name != "root-0" {
		t.Errorf("VM %+v", got)
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
			h := newHarness(t, newPool(10))
			var sent atomic.Int32
			h.client.PrependReactor("create", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
				if int(sent.Add(1)) > tc.failAfter {
					return true, nil, apierrors.NewInternalError(errors.New("etcd is tired"))
				}
				return false, nil, nil
			})
			err := h.c.sync(context.Background(), "ns/pool")
			if int(sent.Load()) != tc.want {
				t.Errorf("sent %d creates, want %d", sent.Load(), tc.want)
			}
			c := condition(&h.pool(t).Status, poolv1beta1.VirtualMachinePoolReplicaFailure)
			if tc.failAfter < 10 {
				if err == nil || c == nil || c.Reason != ReasonFailedScaleOut || c.Status != corev1.ConditionTrue {
					t.Errorf("err %v, ReplicaFailure %+v; want an error and ReplicaFailure FailedScaleOut", err, c)
				}
			} else if err != nil || c != nil {
				t.Errorf("err %v, ReplicaFailure %+v; want neither", err, c)
			}
		})
	}
}

// A create the API server rejects as invalid is reported, not retried; one
// refused (RBAC, a quota) is reported and retried with back-off.
func TestRejectedCreates(t *testing.T) {
	gr := v1.Resource("virtualmachines")
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"invalid", apierrors.NewInvalid(v1.VirtualMachineGroupVersionKind.GroupKind(), "pool-0", nil), false},
		{"bad request", apierrors.NewBadRequest("no"), false},
		{"forbidden", apierrors.NewForbidden(gr, "pool-0", errors.New("cannot create virtualmachines")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newPool(2))
			h.client.PrependReactor("create", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			err := h.c.sync(context.Background(), "ns/pool")
			if (err != nil) != tc.retry {
				t.Errorf("sync error %v, want a retry: %v", err, tc.retry)
			}
			if c := condition(&h.pool(t).Status, poolv1beta1.VirtualMachinePoolReplicaFailure); c == nil || c.Reason != ReasonFailedScaleOut {
				t.Errorf("ReplicaFailure = %+v", c)
			}
		})
	}
}

func TestPausedAndInvalid(t *testing.T) {
	p := newPool(3)
	p.Spec.Paused = true
	h := newHarness(t, p, vm("pool-0", isReady, time.Hour))
	if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
		t.Fatal(err)
	}
	if len(h.created()) != 0 || len(h.deleted()) != 0 {
		t.Errorf("a paused pool wrote %v", fakewrites.List(h.client.Actions()))
	}
	if c := condition(&h.pool(t).Status, poolv1beta1.VirtualMachinePoolReplicaPaused); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonPaused {
		t.Errorf("ReplicaPaused = %+v", c)
	}

	bad := newPool(1)
	bad.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"app": "y"}
	h = newHarness(t, bad)
	if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
		t.Fatal(err)
	}
	if c := condition(&h.pool(t).Status, poolv1beta1.VirtualMachinePoolReplicaFailure); len(h.created()) != 0 || c == nil || c.Reason != ReasonFailedScaleOut {
		t.Errorf("selector not matching the template: created %v, ReplicaFailure %+v", h.created(), c)
	}

	empty := newPool(1)
	empty.Spec.Selector = &metav1.LabelSelector{}
	h = newHarness(t, empty)
	if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
		t.Fatal(err)
	}
	if c := condition(&h.pool(t).Status, poolv1beta1.VirtualMachinePoolReplicaFailure); len(h.created()) != 0 || c == nil || c.Reason != ReasonInvalidSelector {
		t.Errorf("empty selector: created %v, ReplicaFailure %+v", h.created(), c)
	}
}

// Orphans that match and are named after the pool are adopted (and
// count), owned VMs that stop matching are released, other VMs are left
// alone.
func TestAdoptAndRelease(t *testing.T) {
	orphan := vm("pool-4", isReady, time.Hour)
	orphan.OwnerReferences = nil
	otherName := vm("web", isReady, time.Hour)
	otherName.OwnerReferences = nil
	stray := vm("pool-0", isReady, time.Hour)
	stray.Labels = map[string]string{"app": "other"}
	foreign := vm("pool-1", isReady, time.Hour)
	foreign.OwnerReferences[0].UID = "someone-else"
	h := newHarness(t, newPool(1), orphan, otherName, stray, foreign)
	if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
		t.Fatal(err)
	}
	var patched []string
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patched = append(patched, p.GetName())
		}
	}
	slices.Sort(patched)
	if diff := cmp.Diff([]string{"pool-0", "pool-4"}, patched); diff != "" {
		t.Errorf("patched (-want +got):\n%s", diff)
	}
	if len(h.created()) != 0 || len(h.deleted()) != 0 {
		t.Errorf("with the orphan adopted nothing is missing: %v", fakewrites.List(h.client.Actions()))
	}
	got, _ := h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "pool-4", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != "pool-uid" {
		t.Errorf("orphan's controller = %+v", ref)
	}
	got, _ = h.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "pool-0", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref != nil {
		t.Errorf("stray still controlled by %+v", ref)
	}
}

// A VM event enqueues its pool, or the pools that may adopt an orphan.
func TestVMEventsEnqueue(t *testing.T) {
	other := newPool(1)
	other.Name, other.UID = "other", "other-uid"
	h := newHarness(t, newPool(1), other)
	orphan := vm("pool-7", isReady, time.Hour)
	orphan.OwnerReferences = nil
	h.c.vmChanged(orphan, true, false)
	h.c.vmChanged(vm("pool-0", isReady, time.Hour), true, false)
	notOurs := vm("x", isReady, time.Hour)
	notOurs.OwnerReferences[0].APIVersion = "example.com/v1"
	h.c.vmChanged(notOurs, true, false)
	var keys []string
	for h.c.loop.Queue.Len() > 0 {
		k, _ := h.c.loop.Queue.Get()
		keys = append(keys, k)
		h.c.loop.Queue.Done(k)
	}
	if diff := cmp.Diff([]string{"ns/pool"}, keys); diff != "" {
		t.Errorf("queued keys (-want +got):\n%s", diff)
	}
}

// BenchmarkSteadySync measures a sync of a pool of 1,000 ready VMs with
// nothing to do (its status is current): what each VM status change costs.
func BenchmarkSteadySync(b *testing.B) {
	p := newPool(1000)
	p.Status = poolv1beta1.VirtualMachinePoolStatus{Replicas: 1000, ReadyReplicas: 1000, LabelSelector: "app=x"}
	objs := []runtime.Object{p}
	for i := range 1000 {
		objs = append(objs, vm(VMName("pool", i), isReady, time.Hour))
	}
	h := newHarness(b, objs...)
	b.ReportAllocs()
	for b.Loop() {
		if err := h.c.sync(context.Background(), "ns/pool"); err != nil {
			b.Fatal(err)
		}
	}
	if w := fakewrites.List(h.client.Actions()); len(w) > 0 {
		b.Fatalf("a steady pool wrote %v", w)
	}
}
