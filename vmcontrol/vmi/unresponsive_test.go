package vmi

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/vmkit/vmkit/podtemplate"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestUnresponsiveNodesAvoided (#43) checks, with the helpers the scheduler
// and the kubelet use (k8s.io/component-helpers), that a launcher pod made
// while a node's agent is unresponsive is kept off that node and no other;
// that a launcher pod made while the node was healthy is still admitted by
// a restarting kubelet there; and that the node is not tainted, so other
// workloads still schedule there.
func TestUnresponsiveNodesAvoided(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	node := func(name string, heartbeatAge time.Duration) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{v1.NodeSchedulable: "true", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
			Annotations: map[string]string{v1.VirtHandlerHeartbeat: now.Add(-heartbeatAge).Format(time.RFC3339)}}}
		return n
	}
	healthy, stale := node("healthy", time.Minute), node("stale", 10*time.Minute)
	starting := node("starting", 0)
	delete(starting.Annotations, v1.VirtHandlerHeartbeat) // no heartbeat yet: responsive, as KubeVirt

	r, err := podtemplate.New(podtemplate.Config{LauncherImage: "virt-launcher:test", EmulationAllowed: true})
	if err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "0e1d2c3b-4a59-4687-9a8b-7c6d5e4f3a2b"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}},
	}
	render := func(vmi *v1.VirtualMachineInstance) *corev1.Pod {
		pod, err := r.RenderLaunchPod(vmi)
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	fits := func(pod *corev1.Pod, n *corev1.Node) bool {
		ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n)
		if err != nil {
			t.Fatal(err)
		}
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			})
		return ok && !untolerated
	}
	earlier := render(vmi) // made while every node was healthy

	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, n := range []*corev1.Node{healthy, stale, starting} {
		_ = store.Add(n)
	}
	c := &Controller{nodes: store, heartbeat: 5 * time.Minute, now: func() time.Time { return now }}
	pod := render(vmi)
	c.avoidUnresponsiveNodes(pod)
	if fits(pod, stale) {
		t.Error("a launcher pod made now would be scheduled on the node whose agent is unresponsive")
	}
	if !fits(pod, healthy) || !fits(pod, starting) {
		t.Errorf("a launcher pod made now does not fit the healthy nodes: affinity %+v", pod.Spec.Affinity)
	}
	if !fits(earlier, stale) {
		t.Error("a restarting kubelet would refuse the running launcher pod on the unresponsive node")
	}
	other := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if !fits(other, stale) {
		t.Error("another workload cannot be scheduled on the unresponsive node")
	}

	// A VMI's own required node affinity terms each get the exclusion.
	own := vmi.DeepCopy()
	own.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
		}}}}
	pod = render(own)
	c.avoidUnresponsiveNodes(pod)
	stale.Labels["zone"], healthy.Labels["zone"] = "a", "b"
	if fits(pod, stale) || !fits(pod, healthy) {
		t.Errorf("with the VMI's own affinity: fits stale %v, healthy %v; want false, true (terms %+v)", fits(pod, stale), fits(pod, healthy),
			pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}

	// Two unresponsive nodes: both avoided, and the pod stays valid. The
	// API server allows exactly one value in a metadata.name requirement
	// (its "must be only one value when `operator` is 'In' or 'NotIn' for
	// node field selector"), which a list of both broke.
	stale2 := node("stale2", 20*time.Minute)
	_ = store.Add(stale2)
	pod = render(vmi)
	c.avoidUnresponsiveNodes(pod)
	if fits(pod, stale) || fits(pod, stale2) || !fits(pod, healthy) {
		t.Errorf("with two unresponsive nodes: fits stale %v, stale2 %v, healthy %v; want false, false, true", fits(pod, stale), fits(pod, stale2), fits(pod, healthy))
	}
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if len(req.Values) != 1 {
				t.Errorf("node field requirement %+v has %d values: the API server refuses the pod unless it has one", req, len(req.Values))
			}
		}
	}
}
