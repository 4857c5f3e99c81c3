package vm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/kvconfig"
)

// KubeVirt's LiveUpdate rollout of a running VM's template: vmkit applies
// CPU sockets live (CPU hotplug, up to the instance's maxSockets) and guest
// memory (memory hotplug, up to the instance's maxGuest); every other
// change waits for a restart (RestartRequired).

// ReasonCPUHotplug is the reason of the event the controller records when
// it gives a running instance the VM's new CPU sockets.
const ReasonCPUHotplug = "SuccessfulCPUHotplug"

// ReasonMemoryHotplug is the reason of the event the controller records
// when it gives a running instance the VM's new guest memory.
const ReasonMemoryHotplug = "SuccessfulMemoryHotplug"

// liveUpdate reports whether the cluster's rollout strategy is LiveUpdate
// (the KubeVirt CR's vmRolloutStrategy, LiveUpdate when unset, as in
// KubeVirt).
func (c *Controller) liveUpdate() bool {
	kv := kvconfig.Of(c.kubevirts)
	if kv == nil || kv.Spec.Configuration.VMRolloutStrategy == nil {
		return true
	}
	return *kv.Spec.Configuration.VMRolloutStrategy == v1.VMRolloutStrategyLiveUpdate
}

// hotpluggableSockets reports whether the CPU of a template (now) differs
// from the one an instance started with (was) only in more sockets, within
// the running instance's maxSockets: what CPU hotplug applies.
func hotpluggableSockets(was, now *v1.CPU, vmi *v1.VirtualMachineInstance) bool {
	if was == nil || now == nil || vmi.Spec.Domain.CPU == nil {
		return false
	}
	maxSockets := vmi.Spec.Domain.CPU.MaxSockets
	// A template without maxSockets runs with the cluster's default
	// (v1.SetHotplugDefaults): only a maxSockets it names must not change.
	return maxSockets != 0 && (now.MaxSockets == 0 || now.MaxSockets == was.MaxSockets) &&
		max(now.Sockets, 1) >= max(was.Sockets, 1) && now.Sockets <= maxSockets &&
		now.Cores == was.Cores && now.Threads == was.Threads
}

// hotplugCPU gives the running instance the template's CPU sockets when
// they are more than it has and within its maxSockets; the node agent
// hot-plugs them into the guest. The JSON patch tests the sockets it
// replaces, so a concurrent change is not overwritten.
func (c *Controller) hotplugCPU(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.Status.Phase != v1.Running || vm.Spec.Template == nil || !c.liveUpdate() {
		return nil
	}
	now, cur := vm.Spec.Template.Spec.Domain.CPU, vmi.Spec.Domain.CPU
	if now == nil || cur == nil || now.Sockets <= max(cur.Sockets, 1) || !hotpluggableSockets(cur, now, vmi) {
		return nil
	}
	ops := []jsonpatch.Op{jsonpatch.Add("/spec/domain/cpu/sockets", now.Sockets)}
	if cur.Sockets != 0 {
		ops = append([]jsonpatch.Op{jsonpatch.Test("/spec/domain/cpu/sockets", cur.Sockets)}, ops...)
	}
	patch, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return err
	}
	if _, err := c.client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("giving VirtualMachineInstance %s/%s the VM's %d CPU sockets: %w", vmi.Namespace, vmi.Name, now.Sockets, err)
	}
	c.recorder.Eventf(vm, corev1.EventTypeNormal, ReasonCPUHotplug, "CPU sockets of the running instance: %d → %d", max(cur.Sockets, 1), now.Sockets)
	return nil
}

// hotpluggableMemory reports whether the memory of a template (now) differs
// from the one an instance started with (was) only in more guest memory,
// within the running instance's maxGuest and not below what it booted
// with, and the instance's last memory hotplug did not fail: what memory
// hotplug applies.
func hotpluggableMemory(was, now *v1.Memory, vmi *v1.VirtualMachineInstance) bool {
	if was == nil || now == nil || was.Guest == nil || now.Guest == nil || vmi.Spec.Domain.Memory == nil {
		return false
	}
	maxGuest := vmi.Spec.Domain.Memory.MaxGuest
	// A template without maxGuest runs with the cluster's default
	// (v1.SetHotplugDefaults): only a maxGuest it names must not change.
	if maxGuest == nil || now.Guest.Cmp(*maxGuest) > 0 || now.MaxGuest != nil && !apiequality.Semantic.DeepEqual(now.MaxGuest, was.MaxGuest) ||
		!apiequality.Semantic.DeepEqual(now.Hugepages, was.Hugepages) {
		return false
	}
	if st := vmi.Status.Memory; st != nil && st.GuestAtBoot != nil && now.Guest.Cmp(*st.GuestAtBoot) < 0 {
		return false
	}
	if c := vmi.VMICondition(v1.VirtualMachineInstanceMemoryChange); c != nil && c.Status == corev1.ConditionFalse {
		return false
	}
	return true
}

// hotplugMemory gives the running instance the template's guest memory
// when it is more than the instance has and hot-pluggable, raising the
// instance's memory request (and limit, when the template sets one) by as
// much, as KubeVirt does; the VMI controller then grows the launcher pod
// and the node agent plugs the memory into the guest. The JSON patch tests
// what it replaces, so a concurrent change is not overwritten.
func (c *Controller) hotplugMemory(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.Status.Phase != v1.Running || vm.Spec.Template == nil || !c.liveUpdate() ||
		vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed {
		return nil
	}
	now, cur := vm.Spec.Template.Spec.Domain.Memory, vmi.Spec.Domain.Memory
	if now == nil || cur == nil || now.Guest == nil || cur.Guest == nil || now.Guest.Cmp(*cur.Guest) <= 0 {
		return nil
	}
	if !hotpluggableMemory(cur, now, vmi) {
		return nil
	}
	delta := now.Guest.Value() - cur.Guest.Value()
	ops := []jsonpatch.Op{
		jsonpatch.Test("/spec/domain/memory/guest", cur.Guest.String()),
		jsonpatch.Replace("/spec/domain/memory/guest", now.Guest.String()),
	}
	res := vmi.Spec.Domain.Resources
	if req, ok := res.Requests[corev1.ResourceMemory]; ok {
		grown := resource.NewQuantity(req.Value()+delta, resource.BinarySI)
		if grown.Cmp(*now.Guest) < 0 {
			grown = resource.NewQuantity(now.Guest.Value(), resource.BinarySI)
		}
		ops = append(ops,
			jsonpatch.Test("/spec/domain/resources/requests/memory", req.String()),
			jsonpatch.Replace("/spec/domain/resources/requests/memory", grown.String()))
	}
	if lim, ok := res.Limits[corev1.ResourceMemory]; ok {
		ops = append(ops,
			jsonpatch.Test("/spec/domain/resources/limits/memory", lim.String()),
			jsonpatch.Replace("/spec/domain/resources/limits/memory", resource.NewQuantity(lim.Value()+delta, resource.BinarySI).String()))
	}
	patch, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return err
	}
	if _, err := c.client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("giving VirtualMachineInstance %s/%s the VM's %s of guest memory: %w", vmi.Namespace, vmi.Name, now.Guest, err)
	}
	c.recorder.Eventf(vm, corev1.EventTypeNormal, ReasonMemoryHotplug, "Guest memory of the running instance: %s → %s", cur.Guest, now.Guest)
	return nil
}
