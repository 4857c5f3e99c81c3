package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
