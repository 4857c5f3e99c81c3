package vmi

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Memory hotplug (KubeVirt's LiveUpdate of spec.domain.memory.guest, up to
// maxGuest). The VM controller raises a running VMI's guest memory and its
// memory request. Where KubeVirt live-migrates the VMI into a bigger
// launcher pod, this controller grows the pod in place (the pods/resize
// subresource, Kubernetes' in-place pod resize), and only once the kubelet
// has given the compute container the memory does it set
// status.memory.guestRequested. The node agent then plugs the memory into
// the guest (virtio-mem) and reports status.memory.guestCurrent. The
// HotMemoryChange condition says where it is, or why it failed.

// Reasons of the HotMemoryChange condition.
const (
	// ReasonResizingPod: the launcher pod is being given the memory.
	ReasonResizingPod = "ResizingPod"
	// ReasonPluggingMemory: the guest is plugging the memory.
	ReasonPluggingMemory = "PluggingMemory"
	// ReasonMemoryHotplugFailed is KubeVirt's reason of a failed memory
	// hotplug (the VM controller then asks for a restart).
	ReasonMemoryHotplugFailed = "Memory Hotplug Failed"
)

// initialMemoryStatus is the status.memory KubeVirt gives a VMI with guest
// memory when it starts: booted, current and requested all the same.
func initialMemoryStatus(vmi *v1.VirtualMachineInstance) *v1.MemoryStatus {
	m := vmi.Spec.Domain.Memory
	if m == nil || m.Guest == nil {
		return nil
	}
	return &v1.MemoryStatus{GuestAtBoot: ptr.To(m.Guest.DeepCopy()), GuestCurrent: ptr.To(m.Guest.DeepCopy()), GuestRequested: ptr.To(m.Guest.DeepCopy())}
}

// memoryHotplug is what syncMemory saw: the guest memory the node agent may
// now plug (requested), or why it may not (failed).
type memoryHotplug struct {
	requested *resource.Quantity
	failed    string
}

// syncMemory grows the launcher pod of a running VMI whose guest memory
// rose above what its status says was requested, and reports when the pod
// has it. It returns nil when the VMI asks for no more memory.
func (c *Controller) syncMemory(ctx context.Context, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) (*memoryHotplug, error) {
	m, st := vmi.Spec.Domain.Memory, vmi.Status.Memory
	if pod == nil || vmi.Status.Phase != v1.Running || m == nil || m.Guest == nil || m.MaxGuest == nil ||
		st == nil || st.GuestRequested == nil || m.Guest.Cmp(*st.GuestRequested) <= 0 {
		return nil, nil
	}
	// The informer's pods are slim (vmcontrol's transforms): read this one.
	pod, err := c.kube.Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading launcher pod of VirtualMachineInstance %s/%s for memory hotplug: %w", vmi.Namespace, vmi.Name, err)
	}
	rendered, err := c.renderer.RenderLaunchPod(vmi)
	if err != nil {
		return &memoryHotplug{failed: fmt.Sprintf("rendering the launcher pod for %s of guest memory: %v", m.Guest, err)}, nil
	}
	want := containerResources(rendered.Spec.Containers, ComputeContainer)
	have := containerResources(pod.Spec.Containers, ComputeContainer)
	if want == nil || have == nil {
		return &memoryHotplug{failed: fmt.Sprintf("the launcher pod %s has no %s container", pod.Name, ComputeContainer)}, nil
	}
	patch := resizePatch(want, have)
	if patch != nil {
		data, err := json.Marshal(patch)
		if err != nil {
			return nil, err
		}
		if _, err := c.kube.Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "resize"); err != nil {
			return nil, fmt.Errorf("growing launcher pod %s/%s for %s of guest memory: %w", pod.Namespace, pod.Name, m.Guest, err)
		}
		c.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonResizingPod, "Resizing launcher pod %s for %s of guest memory", pod.Name, m.Guest)
		return &memoryHotplug{}, nil // the pod's update brings the VMI back
	}
	done, failed := resizeDone(pod, want)
	if failed != "" {
		return &memoryHotplug{failed: fmt.Sprintf("the kubelet cannot give launcher pod %s the memory for %s of guest memory: %s", pod.Name, m.Guest, failed)}, nil
	}
	if !done {
		return &memoryHotplug{}, nil
	}
	return &memoryHotplug{requested: ptr.To(m.Guest.DeepCopy())}, nil
}

// containerResources returns the resources of the named container.
func containerResources(cs []corev1.Container, name string) *corev1.ResourceRequirements {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i].Resources
		}
	}
	return nil
}

// resizePatch is the strategic merge patch of the pods/resize subresource
// that raises the compute container's memory request and limit to want's,
// nil when have already holds them. Memory is never lowered here.
func resizePatch(want, have *corev1.ResourceRequirements) map[string]any {
	res := map[string]any{}
	for kind, lists := range map[string][2]corev1.ResourceList{"requests": {want.Requests, have.Requests}, "limits": {want.Limits, have.Limits}} {
		w, ok := lists[0][corev1.ResourceMemory]
		if !ok {
			continue
		}
		if h, ok := lists[1][corev1.ResourceMemory]; ok && h.Cmp(w) >= 0 {
			continue
		}
		res[kind] = map[string]string{string(corev1.ResourceMemory): w.String()}
	}
	if len(res) == 0 {
		return nil
	}
	return map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": ComputeContainer, "resources": res}}}}
}

// resizeDone reports whether the kubelet has given the compute container
// want's memory (its status resources, as the kubelet reports them since
// in-place resize), or why it cannot (the PodResizePending condition with
// reason Infeasible).
func resizeDone(pod *corev1.Pod, want *corev1.ResourceRequirements) (bool, string) {
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch {
		case c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible:
			return false, c.Message
		case c.Type == corev1.PodResizeInProgress && c.Reason == corev1.PodReasonError:
			return false, c.Message
		case c.Type == corev1.PodResizePending, c.Type == corev1.PodResizeInProgress:
			return false, ""
		}
	}
	if pod.Status.ObservedGeneration != 0 && pod.Status.ObservedGeneration < pod.Generation {
		return false, "" // the kubelet has not seen the resize yet
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != ComputeContainer {
			continue
		}
		if cs.Resources == nil {
			return true, "" // a kubelet that reports none: the conditions said it is done
		}
		for _, lists := range [][2]corev1.ResourceList{{want.Requests, cs.Resources.Requests}, {want.Limits, cs.Resources.Limits}} {
			if w, ok := lists[0][corev1.ResourceMemory]; ok {
				if h, ok := lists[1][corev1.ResourceMemory]; !ok || h.Cmp(w) < 0 {
					return false, ""
				}
			}
		}
		return true, ""
	}
	return false, ""
}

// memoryChangeCondition is the HotMemoryChange condition of a status: True
// while memory is being hot-plugged, False when it failed, nil when the
// guest has what its spec asks for.
func memoryChangeCondition(vmi *v1.VirtualMachineInstance, s *v1.VirtualMachineInstanceStatus, hp *memoryHotplug) *v1.VirtualMachineInstanceCondition {
	m, st := vmi.Spec.Domain.Memory, s.Memory
	if m == nil || m.Guest == nil || st == nil || st.GuestRequested == nil || s.Phase != v1.Running {
		return nil
	}
	c := &v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceMemoryChange, Status: corev1.ConditionTrue}
	switch {
	case hp != nil && hp.failed != "":
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, ReasonMemoryHotplugFailed, hp.failed
	case m.Guest.Cmp(*st.GuestRequested) > 0:
		c.Reason, c.Message = ReasonResizingPod, fmt.Sprintf("growing the launcher pod for %s of guest memory", m.Guest)
	case st.GuestCurrent == nil || st.GuestCurrent.Cmp(*st.GuestRequested) != 0:
		c.Reason, c.Message = ReasonPluggingMemory, fmt.Sprintf("the guest is plugging memory up to %s", st.GuestRequested)
	default:
		return nil
	}
	return c
}
