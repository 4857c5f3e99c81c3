package vmi

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
)

func cdiDataVolume(name, phase string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if phase != "" {
		u.Object["status"] = map[string]any{"phase": phase}
	}
	u.SetAPIVersion("cdi.kubevirt.io/v1beta1")
	u.SetKind("DataVolume")
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

// newDataVolumeHarness is newClaimHarness with CDI's DataVolumes watched too.
func newDataVolumeHarness(t *testing.T, vmi *v1.VirtualMachineInstance, claims []*corev1.PersistentVolumeClaim, dvs ...*unstructured.Unstructured) *claimHarness {
	t.Helper()
	client := fake.NewSimpleClientset(vmi)
	kube := kubefake.NewSimpleClientset()
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := kubeinformers.NewSharedInformerFactory(kube, 0)
	claimInformer := kf.Core().V1().PersistentVolumeClaims()
	dvInformer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	events := record.NewFakeRecorder(10)
	c, err := New(Config{Client: client.KubevirtV1(), Kube: podsOf(kube), Renderer: fakeRenderer{}, Recorder: events,
		VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer(), Pods: kf.Core().V1().Pods().Informer(), Claims: claimInformer.Informer(), DataVolumes: dvInformer})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Kubevirt().V1().VirtualMachineInstances().Informer().GetIndexer().Add(vmi)
	for _, pvc := range claims {
		_ = claimInformer.Informer().GetIndexer().Add(pvc)
	}
	for _, dv := range dvs {
		_ = dvInformer.GetIndexer().Add(dv)
	}
	c.now = func() time.Time { return now }
	return &claimHarness{harness: harness{c: c, client: client, kube: kube}, events: events}
}

func TestSyncWaitsForDataVolumes(t *testing.T) {
	root := func() *v1.VirtualMachineInstance { return withVolumes(newVMI(""), dvVolume("root", "fedora-dv")) }
	cases := []struct {
		name       string
		dv         *unstructured.Unstructured // nil: none
		claim      bool
		wantWrites []string
		wantReason string // Synchronized=False reason; "" for none
		wantMsg    string
	}{
		{"importing: no pod", cdiDataVolume("fedora-dv", "ImportInProgress"), true,
			[]string{"update virtualmachineinstances"}, ReasonDataVolumeNotReady, `spec.volumes[0] "root": DataVolume ns/fedora-dv is ImportInProgress`},
		{"no phase yet: no pod", cdiDataVolume("fedora-dv", ""), false,
			[]string{"update virtualmachineinstances"}, ReasonDataVolumeNotReady, `spec.volumes[0] "root": DataVolume ns/fedora-dv is not populated yet`},
		{"failed: no pod", cdiDataVolume("fedora-dv", "Failed"), true,
			[]string{"update virtualmachineinstances"}, ReasonDataVolumeError, `spec.volumes[0] "root": DataVolume ns/fedora-dv failed`},
		{"succeeded: pod created", cdiDataVolume("fedora-dv", "Succeeded"), true,
			[]string{"create pods", "update virtualmachineinstances"}, "", ""},
		{"waiting for its first consumer: the pod is it", cdiDataVolume("fedora-dv", "WaitForFirstConsumer"), true,
			[]string{"create pods", "update virtualmachineinstances"}, "", ""},
		{"garbage-collected after success: the claim decides", nil, true,
			[]string{"create pods", "update virtualmachineinstances"}, "", ""},
		{"neither DataVolume nor claim", nil, false,
			[]string{"update virtualmachineinstances"}, ReasonFailedPvcNotFound, `spec.volumes[0] "root": PersistentVolumeClaim ns/fedora-dv not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var claims []*corev1.PersistentVolumeClaim
			if tc.claim {
				claims = append(claims, claim("fedora-dv"))
			}
			var dvs []*unstructured.Unstructured
			if tc.dv != nil {
				dvs = append(dvs, tc.dv)
			}
			h := newDataVolumeHarness(t, root(), claims, dvs...)
			if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
				t.Fatalf("sync: %v (a DataVolume is waited for, not retried)", err)
			}
			if diff := cmp.Diff(tc.wantWrites, fakewrites.List(h.kube.Actions(), h.client.Actions())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			c := h.vmi(t).VMICondition(v1.VirtualMachineInstanceSynchronized)
			switch {
			case tc.wantReason == "" && c != nil:
				t.Errorf("unexpected condition %+v", c)
			case tc.wantReason != "" && (c == nil || c.Status != corev1.ConditionFalse || c.Reason != tc.wantReason || c.Message != tc.wantMsg):
				t.Errorf("condition %+v, want False/%s %q", c, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

// TestDataVolumeEventEnqueuesItsUsers: a DataVolume's change brings back the
// VMIs whose volumes name it.
func TestDataVolumeEventEnqueuesItsUsers(t *testing.T) {
	h := newDataVolumeHarness(t, withVolumes(newVMI(""), dvVolume("root", "fedora-dv")), nil)
	h.c.enqueueClaimUsers(cdiDataVolume("fedora-dv", "Succeeded"))
	h.c.enqueueClaimUsers(cdiDataVolume("other-dv", "Succeeded"))
	if n := h.c.loop.Queue.Len(); n != 1 {
		t.Fatalf("queue length %d, want 1", n)
	}
}
