package podindex

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Two controllers asking for the index on one informer get one index;
// Of returns the VMI's labelled pods of its namespace only.
func TestAddOnceAndOf(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, time.Hour, cache.Indexers{})
	for range 2 {
		if err := Add(inf); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(inf.GetIndexer().GetIndexers()); n != 1 {
		t.Errorf("%d indexes, want 1", n)
	}
	pod := func(ns, name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1.CreatedByLabel: uid}}}
	}
	for _, p := range []*corev1.Pod{pod("ns", "a", "u1"), pod("other", "b", "u1"), pod("ns", "c", "u2"), {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}}} {
		if err := inf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Of(inf.GetIndexer(), &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", UID: "u1"}})
	if err != nil || len(got) != 1 || got[0].Name != "a" {
		t.Errorf("Of = %v, %v; want pod a", got, err)
	}
}
