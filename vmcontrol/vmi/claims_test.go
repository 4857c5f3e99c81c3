package vmi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
)

type claimHarness struct {
	harness
	events *record.FakeRecorder
}

// newClaimHarness is newHarness with a claim informer holding claims. A nil
// renderer renders with podtemplate, looking modes up in the claim lister.
func newClaimHarness(t *testing.T, renderer PodRenderer, vmi *v1.VirtualMachineInstance, claims ...*corev1.PersistentVolumeClaim) *claimHarness {
	t.Helper()
	client := fake.NewSimpleClientset(vmi)
	kube := kubefake.NewSimpleClientset()
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := kubeinformers.NewSharedInformerFactory(kube, 0)
	claimInformer := kf.Core().V1().PersistentVolumeClaims()
	if renderer == nil {
		r, err := podtemplate.New(podtemplate.Config{LauncherImage: "launcher", ClaimVolumeMode: ClaimVolumeMode(claimInformer.Lister())})
		if err != nil {
			t.Fatal(err)
		}
		renderer = r
	}
	events := record.NewFakeRecorder(10)
	c, err := New(Config{Client: client.KubevirtV1(), Kube: podsOf(kube), ClaimClient: claimsOf{kube}, Renderer: renderer, Recorder: events,
		VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer(), Pods: kf.Core().V1().Pods().Informer(), Claims: claimInformer.Informer()})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Kubevirt().V1().VirtualMachineInstances().Informer().GetIndexer().Add(vmi)
	for _, pvc := range claims {
		_ = claimInformer.Informer().GetIndexer().Add(pvc)
	}
	c.now = func() time.Time { return now }
	return &claimHarness{harness: harness{c: c, client: client, kube: kube}, events: events}
}

func (h *claimHarness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func claim(name string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("pvc-" + name)},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	for _, m := range mutate {
		m(pvc)
	}
	return pvc
}

func withVolumes(vmi *v1.VirtualMachineInstance, vols ...v1.Volume) *v1.VirtualMachineInstance {
	vmi.Spec.Volumes = vols
	return vmi
}

func pvcVolume(name, claim string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
}

func dvVolume(name, dv string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: dv}}}
}

func TestSyncWaitsForClaims(t *testing.T) {
	deleting := metav1.NewTime(now)
	hotplug := pvcVolume("hot", "missing")
	hotplug.PersistentVolumeClaim.Hotpluggable = true
	waiting := newVMI("")
	waiting.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
		Reason: ReasonFailedPvcNotFound, Message: `spec.volumes[0] "disk1": PersistentVolumeClaim ns/foo not found`}}
	cases := []struct {
		name       string
		vmi        *v1.VirtualMachineInstance
		claims     []*corev1.PersistentVolumeClaim
		wantWrites []string
		wantPhase  v1.VirtualMachineInstancePhase
		wantCond   string // message of Synchronized=False/FailedPvcNotFound; "" for no condition
	}{
		{"missing claim: no pod", withVolumes(newVMI(""), pvcVolume("disk0", "present"), pvcVolume("disk1", "foo")),
			[]*corev1.PersistentVolumeClaim{claim("present")},
			[]string{"update virtualmachineinstances"}, v1.Pending, `spec.volumes[1] "disk1": PersistentVolumeClaim ns/foo not found`},
		{"dataVolume: its claim is looked up", withVolumes(newVMI(""), dvVolume("root", "fedora-dv")), nil,
			[]string{"update virtualmachineinstances"}, v1.Pending, `spec.volumes[0] "root": PersistentVolumeClaim ns/fedora-dv not found`},
		{"claim present: pod created", withVolumes(newVMI(""), pvcVolume("disk1", "foo"), dvVolume("root", "fedora-dv")),
			[]*corev1.PersistentVolumeClaim{claim("foo"), claim("fedora-dv")},
			[]string{"create pods", "update virtualmachineinstances"}, v1.Scheduling, ""},
		{"claim appeared: condition cleared", withVolumes(waiting, pvcVolume("disk1", "foo")), []*corev1.PersistentVolumeClaim{claim("foo")},
			[]string{"create pods", "update virtualmachineinstances"}, v1.Scheduling, ""},
		{"claim waiting for first consumer: pod created", withVolumes(newVMI(""), pvcVolume("disk1", "foo")),
			[]*corev1.PersistentVolumeClaim{claim("foo", func(p *corev1.PersistentVolumeClaim) { p.Status.Phase = corev1.ClaimPending })},
			[]string{"create pods", "update virtualmachineinstances"}, v1.Scheduling, ""},
		{"claim being deleted still exists (as KubeVirt)", withVolumes(newVMI(""), pvcVolume("disk1", "foo")),
			[]*corev1.PersistentVolumeClaim{claim("foo", func(p *corev1.PersistentVolumeClaim) { p.DeletionTimestamp = &deleting })},
			[]string{"create pods", "update virtualmachineinstances"}, v1.Scheduling, ""},
		{"hotpluggable claim does not hold the pod", withVolumes(newVMI(""), hotplug), nil,
			[]string{"create pods", "update virtualmachineinstances"}, v1.Scheduling, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newClaimHarness(t, fakeRenderer{}, tc.vmi.DeepCopy(), tc.claims...)
			if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
				t.Fatalf("sync: %v (a missing claim is waited for, not retried)", err)
			}
			if diff := cmp.Diff(tc.wantWrites, fakewrites.List(h.kube.Actions(), h.client.Actions())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			got := h.vmi(t)
			if got.Status.Phase != tc.wantPhase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tc.wantPhase)
			}
			c := got.VMICondition(v1.VirtualMachineInstanceSynchronized)
			events := h.drainEvents()
			if tc.wantCond == "" {
				if c != nil {
					t.Errorf("Synchronized condition kept: %+v", c)
				}
				for _, e := range events {
					if e != "Normal SuccessfulCreate Created virtual machine pod virt-launcher-vmi-abcde" {
						t.Errorf("unexpected event %q", e)
					}
				}
				return
			}
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonFailedPvcNotFound || c.Message != tc.wantCond {
				t.Errorf("condition %+v, want False/%s %q", c, ReasonFailedPvcNotFound, tc.wantCond)
			}
			if diff := cmp.Diff([]string{"Warning FailedPvcNotFound " + tc.wantCond}, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitingForClaimWritesAndWarnsOnce(t *testing.T) {
	h := newClaimHarness(t, fakeRenderer{}, withVolumes(newVMI(""), pvcVolume("disk1", "foo")))
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.drainEvents()); n != 1 {
		t.Fatalf("%d events on the first sync, want 1", n)
	}
	// The cache now shows the VMI as written: a resync writes and warns nothing.
	h2 := newClaimHarness(t, fakeRenderer{}, h.vmi(t))
	if err := h2.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if w := fakewrites.List(h2.kube.Actions(), h2.client.Actions()); len(w) != 0 {
		t.Errorf("writes while still waiting: %v", w)
	}
	if e := h2.drainEvents(); len(e) != 0 {
		t.Errorf("events while still waiting: %v", e)
	}
}

func TestBlockClaimIsAttachedAsDevice(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	vmi := withVolumes(newVMI(""), pvcVolume("fs", "fs-claim"), dvVolume("raw", "block-dv"))
	vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "fs"}, {Name: "raw"}}
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	h := newClaimHarness(t, nil, vmi,
		claim("fs-claim"), claim("block-dv", func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeMode = &block }))
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if c := h.vmi(t).VMICondition(v1.VirtualMachineInstanceSynchronized); c != nil {
		t.Fatalf("condition %+v", c)
	}
	pods, err := h.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods %v, err %v; want one", pods, err)
	}
	var compute *corev1.Container
	for i := range pods.Items[0].Spec.Containers {
		if c := &pods.Items[0].Spec.Containers[i]; c.Name == ComputeContainer {
			compute = c
		}
	}
	if compute == nil {
		t.Fatal("no compute container")
	}
	var devices, mounts []string
	for _, d := range compute.VolumeDevices {
		devices = append(devices, d.Name)
	}
	for _, m := range compute.VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	if diff := cmp.Diff([]string{"raw"}, devices); diff != "" {
		t.Errorf("volumeDevices (-want +got):\n%s", diff)
	}
	found := false
	for _, m := range mounts {
		if m == "raw" {
			t.Error("the Block claim is also mounted as a filesystem")
		}
		found = found || m == "fs"
	}
	if !found {
		t.Errorf("the Filesystem claim is not mounted: %v", mounts)
	}
}

func TestClaimEventEnqueuesItsVMIs(t *testing.T) {
	h := newClaimHarness(t, fakeRenderer{}, withVolumes(newVMI(""), dvVolume("root", "foo")))
	idx := h.c.vmiIndexer
	other := withVolumes(newVMI(""), pvcVolume("disk", "bar"))
	other.Name = "other"
	elsewhere := withVolumes(newVMI(""), pvcVolume("disk", "foo"))
	elsewhere.Namespace = "ns2"
	_ = idx.Add(other)
	_ = idx.Add(elsewhere)

	q := h.c.loop.Queue
	h.c.enqueueClaimUsers(claim("foo"))
	if q.Len() != 1 {
		t.Fatalf("queue length %d after the claim foo was added, want 1 (ns/vmi)", q.Len())
	}
	key, _ := q.Get()
	q.Done(key)
	if key != "ns/vmi" {
		t.Fatalf("enqueued %q, want ns/vmi", key)
	}
	h.c.enqueueClaimUsers(claim("unused"))
	if q.Len() != 0 {
		t.Fatalf("a claim no VMI needs enqueued %d VMIs", q.Len())
	}
}
