package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/vmkit/vmkit/podtemplate"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestUnresponsiveNodeKeepsLaunchersThroughKubeletRestart checks what the
// controller leaves on a node whose agent stopped heartbeating against the
// checks the kubelet and the scheduler make, with the helpers they use
// (k8s.io/component-helpers): a restarting kubelet re-admits its running
// launcher pods (their required node affinity still matches, and it looks
// at NoExecute taints only), while the scheduler puts no new launcher pod
// there (an untolerated NoSchedule taint). KubeVirt's label
// kubevirt.io/schedulable=false fails the kubelet's check, which is why the
// controller does not write it.
func TestUnresponsiveNodeKeepsLaunchersThroughKubeletRestart(t *testing.T) {
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
	pod, err := r.RenderLaunchPod(vmi)
	if err != nil {
		t.Fatal(err)
	}
	healthy := newNode(time.Minute, "true")
	healthy.Labels[corev1.LabelOSStable] = "linux"
	healthy.Labels[corev1.LabelArchStable] = "amd64"
	admits := func(node *corev1.Node) bool {
		ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
		if err != nil {
			t.Fatal(err)
		}
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations,
			func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute })
		return ok && !untolerated
	}
	schedules := func(node *corev1.Node) bool {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			})
		return admits(node) && !untolerated
	}
	if !admits(healthy) || !schedules(healthy) {
		t.Fatalf("a launcher pod (node selector %v) does not fit the healthy node %v", pod.Spec.NodeSelector, healthy.Labels)
	}

	stale := healthy.DeepCopy()
	stale.Annotations[v1.VirtHandlerHeartbeat] = now.Add(-10 * time.Minute).Format(time.RFC3339)
	h := newHarness(t, stale, nil, nil)
	if err := h.c.sync(context.Background(), stale.Name); err != nil {
		t.Fatal(err)
	}
	marked, err := h.kube.CoreV1().Nodes().Get(context.Background(), stale.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !admits(marked) {
		t.Errorf("a restarting kubelet would reject the running launcher pod on the node as marked (labels %v, taints %v)", marked.Labels, marked.Spec.Taints)
	}
	if schedules(marked) {
		t.Errorf("a new launcher pod would be scheduled on the node as marked (labels %v, taints %v)", marked.Labels, marked.Spec.Taints)
	}

	labeled := healthy.DeepCopy()
	labeled.Labels[v1.NodeSchedulable] = "false"
	if admits(labeled) {
		t.Error("KubeVirt's schedulable=false label passes the kubelet's admission: the premise of the taint is wrong")
	}
}
