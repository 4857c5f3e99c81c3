package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/installstrategy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestActiveKubeVirt(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	kv := func(ns, name string, created metav1.Time, finalizer, deleting bool) *v1.KubeVirt {
		out := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), CreationTimestamp: created}}
		if finalizer {
			out.Finalizers = []string{v1.KubeVirtFinalizer}
		}
		if deleting {
			out.DeletionTimestamp = &t1
		}
		return out
	}
	tests := []struct {
		name string
		kvs  []*v1.KubeVirt
		want string // namespace/name, "" for none
	}{
		{"none", nil, ""},
		{"oldest wins", []*v1.KubeVirt{kv("b", "new", t1, false, false), kv("a", "old", t0, false, false)}, "a/old"},
		{"same age: by key", []*v1.KubeVirt{kv("b", "x", t0, false, false), kv("a", "x", t0, false, false)}, "a/x"},
		{"finalizer holder wins over older", []*v1.KubeVirt{kv("a", "old", t0, false, false), kv("b", "held", t1, true, false)}, "b/held"},
		{"a deleting holder keeps it until done", []*v1.KubeVirt{kv("a", "old", t0, false, false), kv("b", "held", t1, true, true)}, "b/held"},
		{"deleting without finalizer is skipped", []*v1.KubeVirt{kv("a", "old", t0, false, true), kv("b", "new", t1, false, false)}, "b/new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if kv := activeKubeVirt(tt.kvs); kv != nil {
				got = kv.Namespace + "/" + kv.Name
			}
			if got != tt.want {
				t.Errorf("active = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	var st v1.KubeVirtStatus
	setCondition(&st, v1.KubeVirtConditionAvailable, corev1.ConditionFalse, "A", "a", t0)
	setCondition(&st, v1.KubeVirtConditionAvailable, corev1.ConditionFalse, "B", "b", t1) // same status: times kept
	setCondition(&st, v1.KubeVirtConditionDegraded, corev1.ConditionFalse, "C", "c", t1)
	want := []v1.KubeVirtCondition{
		{Type: v1.KubeVirtConditionAvailable, Status: corev1.ConditionFalse, Reason: "B", Message: "b", LastProbeTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)},
		{Type: v1.KubeVirtConditionDegraded, Status: corev1.ConditionFalse, Reason: "C", Message: "c", LastProbeTime: metav1.NewTime(t1), LastTransitionTime: metav1.NewTime(t1)},
	}
	if diff := cmp.Diff(want, st.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	setCondition(&st, v1.KubeVirtConditionAvailable, corev1.ConditionTrue, "D", "d", t1)
	if got := st.Conditions[0].LastTransitionTime; !got.Equal(&metav1.Time{Time: t1}) {
		t.Errorf("transition time %v, want %v", got, t1)
	}
}

// TestPullFailures: a component pod waiting for an image it cannot pull is
// named with its image and the kubelet's words; a pod waiting for another
// reason, or of a component not in the strategy, is not.
func TestPullFailures(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pod := func(name, component, image, reason, msg string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kubevirt", Labels: map[string]string{v1.AppLabel: component}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: component, Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
			}}},
		}
	}
	for _, p := range []*corev1.Pod{
		pod("api-1", v1.VirtAPIValue, "r.example/vmkit/virt-api:nope", "ImagePullBackOff", `Back-off pulling image "r.example/vmkit/virt-api:nope"`),
		pod("api-2", v1.VirtAPIValue, "r.example/vmkit/virt-api:nope", "ErrImagePull", "not found"), // the same image once
		pod("handler-1", v1.VirtHandlerValue, "r.example/vmkit/virt-handler:nope", "ErrImagePull", "manifest unknown"),
		pod("controller-1", v1.VirtControllerValue, "r.example/vmkit/virt-controller:v1", "ContainerCreating", ""),
		pod("other-1", "something-else", "r.example/other:nope", "ErrImagePull", "not found"),
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c := &Controller{pods: corelisters.NewPodLister(indexer)}
	s := &installstrategy.Strategy{
		Deployments: []*appsv1.Deployment{
			{ObjectMeta: metav1.ObjectMeta{Name: v1.VirtAPIValue, Namespace: "kubevirt"}},
			{ObjectMeta: metav1.ObjectMeta{Name: v1.VirtControllerValue, Namespace: "kubevirt"}},
		},
		DaemonSets: []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: v1.VirtHandlerValue, Namespace: "kubevirt"}}},
	}
	want := []string{
		`virt-api: image r.example/vmkit/virt-api:nope cannot be pulled (ImagePullBackOff: Back-off pulling image "r.example/vmkit/virt-api:nope")`,
		"virt-handler: image r.example/vmkit/virt-handler:nope cannot be pulled (ErrImagePull: manifest unknown)",
	}
	if diff := cmp.Diff(want, c.pullFailures(s)); diff != "" {
		t.Errorf("pullFailures (-want +got):\n%s", diff)
	}
	if got := (&Controller{}).pullFailures(s); got != nil {
		t.Errorf("without a pod informer: %v, want nothing", got)
	}
}
