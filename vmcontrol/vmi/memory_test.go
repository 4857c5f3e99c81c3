package vmi

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// memoryRenderer renders the compute container with a memory request of
// the VMI's guest memory plus 100Mi, as podtemplate adds overhead.
func memoryRenderer(vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	p, _ := fakeRenderer{}.RenderLaunchPod(vmi)
	req := vmi.Spec.Domain.Memory.Guest.DeepCopy()
	req.Add(resource.MustParse("100Mi"))
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: req}
	return p, nil
}

// TestMemoryHotplugResizesPodFirst: a running VMI whose guest memory grew
// gets its launcher pod resized (pods/resize) and HotMemoryChange=True
// ResizingPod; only when the kubelet reports the compute container has the
// memory does status.memory.guestRequested follow, for the node agent to
// plug; an infeasible resize is HotMemoryChange=False with the kubelet's
// message; a guest with all its memory has no condition.
func TestMemoryHotplugResizesPodFirst(t *testing.T) {
	ctx := context.Background()
	gi, more := resource.MustParse("1Gi"), resource.MustParse("1536Mi")
	vmi := newVMI(v1.Running)
	vmi.Status.NodeName = "node"
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: &more, MaxGuest: ptr.To(resource.MustParse("2Gi"))}
	vmi.Status.Memory = &v1.MemoryStatus{GuestAtBoot: &gi, GuestCurrent: &gi, GuestRequested: &gi}
	pod := launcherPod(vmi, corev1.PodRunning, true, "node")
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1124Mi")}
	h := newHarness(t, renderFunc(memoryRenderer), vmi, pod)
	if err := h.c.sync(ctx, "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	var resized bool
	for _, a := range h.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetSubresource() == "resize" {
			resized = true
			if want := `{"spec":{"containers":[{"name":"compute","resources":{"requests":{"memory":"1636Mi"}}}]}}`; string(p.GetPatch()) != want {
				t.Errorf("resize patch %s, want %s", p.GetPatch(), want)
			}
		}
	}
	if !resized {
		t.Fatalf("no pods/resize patch; actions %v", h.kube.Actions())
	}
	got := h.vmi(t)
	if c := got.VMICondition(v1.VirtualMachineInstanceMemoryChange); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonResizingPod {
		t.Errorf("HotMemoryChange while resizing: %+v, want True ResizingPod", c)
	}
	if got.Status.Memory.GuestRequested.String() != "1Gi" {
		t.Errorf("guestRequested %s before the kubelet resized the pod, want 1Gi", got.Status.Memory.GuestRequested)
	}

	// The kubelet cannot: the condition says why, and nothing is requested.
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1636Mi")}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity: memory"})
	h = newHarness(t, renderFunc(memoryRenderer), got, pod)
	if err := h.c.sync(ctx, "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got = h.vmi(t)
	if c := got.VMICondition(v1.VirtualMachineInstanceMemoryChange); c == nil || c.Status != corev1.ConditionFalse ||
		c.Reason != ReasonMemoryHotplugFailed || c.Message == "" {
		t.Errorf("HotMemoryChange after an infeasible resize: %+v, want False with the kubelet's message", c)
	}
	if got.Status.Memory.GuestRequested.String() != "1Gi" {
		t.Errorf("guestRequested %s after an infeasible resize, want 1Gi", got.Status.Memory.GuestRequested)
	}

	// The kubelet did: the node agent may plug.
	pod.Status.Conditions = pod.Status.Conditions[:len(pod.Status.Conditions)-1]
	pod.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1636Mi")}}
	h = newHarness(t, renderFunc(memoryRenderer), got, pod)
	if err := h.c.sync(ctx, "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got = h.vmi(t)
	if got.Status.Memory.GuestRequested.String() != "1536Mi" {
		t.Errorf("guestRequested %s once the pod has the memory, want 1536Mi", got.Status.Memory.GuestRequested)
	}
	if c := got.VMICondition(v1.VirtualMachineInstanceMemoryChange); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonPluggingMemory {
		t.Errorf("HotMemoryChange while the guest plugs: %+v, want True PluggingMemory", c)
	}

	// The guest plugged it (the node agent's guestCurrent): no condition.
	got.Status.Memory.GuestCurrent = &more
	h = newHarness(t, renderFunc(memoryRenderer), got, pod)
	if err := h.c.sync(ctx, "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if c := h.vmi(t).VMICondition(v1.VirtualMachineInstanceMemoryChange); c != nil {
		t.Errorf("HotMemoryChange once the guest has its memory: %+v, want none", c)
	}
}

func TestResizePatchNeverLowers(t *testing.T) {
	req := func(mem string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	if p := resizePatch(req("1Gi"), req("2Gi")); p != nil {
		t.Errorf("resizePatch to less memory = %v, want nil", p)
	}
	if p := resizePatch(req("2Gi"), req("2Gi")); p != nil {
		t.Errorf("resizePatch to the same memory = %v, want nil", p)
	}
	p := resizePatch(req("3Gi"), req("2Gi"))
	res := p["spec"].(map[string]any)["containers"].([]map[string]any)[0]["resources"].(map[string]any)
	if len(res) != 2 {
		t.Errorf("resizePatch to more memory = %v, want requests and limits", p)
	}
}
