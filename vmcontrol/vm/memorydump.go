package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's memory dump (virtctl memory-dump get/remove, virt-api's
// memorydump and removememorydump): virt-api records the request in the
// VM's status.memoryDumpRequest (Associating); this controller adds a
// memoryDump volume of the claim to the running instance, the node agent
// mounts the claim into the launcher, which dumps the guest's memory onto
// it (the volume's status goes MemoryDumpInProgress, then
// MemoryDumpCompleted or MemoryDumpFailed); the controller then records
// the file and removes the volume (Unmounting), and once the instance has
// let it go the request is Completed. removememorydump (Dissociating)
// removes the volume if it is still there and clears the request.

// memoryDumpVolume is the instance's memoryDump volume of claim.
func memoryDumpVolume(claim string) v1.Volume {
	return v1.Volume{Name: claim, VolumeSource: v1.VolumeSource{MemoryDump: &v1.MemoryDumpVolumeSource{ClaimName: claim, Hotpluggable: true}}}
}

// handleMemoryDump adds the requested memoryDump volume to the running
// instance (Associating) or removes it (Unmounting, Failed, Dissociating),
// with a JSON patch that tests the volumes it replaces, and annotates the
// claim with the dump's outcome (Unmounting, Failed).
func (c *Controller) handleMemoryDump(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	req := vm.Status.MemoryDumpRequest
	if req == nil {
		return nil
	}
	if err := c.annotateDumpClaim(ctx, vm); err != nil {
		return err
	}
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.IsFinal() {
		return nil
	}
	has := slices.ContainsFunc(vmi.Spec.Volumes, func(v v1.Volume) bool { return v.Name == req.ClaimName })
	var vols []v1.Volume
	switch req.Phase {
	case v1.MemoryDumpAssociating:
		if has || vmi.Status.Phase != v1.Running || req.Remove {
			return nil
		}
		vols = append(slices.Clone(vmi.Spec.Volumes), memoryDumpVolume(req.ClaimName))
	case v1.MemoryDumpUnmounting, v1.MemoryDumpFailed, v1.MemoryDumpDissociating:
		if !has {
			return nil
		}
		vols = slices.DeleteFunc(slices.Clone(vmi.Spec.Volumes), func(v v1.Volume) bool { return v.Name == req.ClaimName && v.MemoryDump != nil })
	default:
		return nil
	}
	ops := []jsonpatch.Op{jsonpatch.Test("/spec/volumes", vmi.Spec.Volumes)}
	if len(vols) == 0 {
		ops = append(ops, jsonpatch.Remove("/spec/volumes"))
	} else {
		ops = append(ops, jsonpatch.Add("/spec/volumes", vols))
	}
	patch, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return err
	}
	if _, err := c.client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("memory dump of VirtualMachine %s/%s onto claim %s (%s): %w", vm.Namespace, vm.Name, req.ClaimName, req.Phase, err)
	}
	return nil
}

// dumpFailed is the memory dump annotation of a claim whose dump failed
// (KubeVirt's).
const dumpFailed = "Memory dump failed"

// annotateDumpClaim records on the claim of the VM's memory dump what the
// dump left there, as KubeVirt's controller does: the file's name once it
// is written (Unmounting), "Memory dump failed" (Failed). A claim that
// already says so is left alone; a missing one is an error.
func (c *Controller) annotateDumpClaim(ctx context.Context, vm *v1.VirtualMachine) error {
	req := vm.Status.MemoryDumpRequest
	if c.claims == nil || c.claimClient == nil {
		return nil
	}
	var val string
	switch {
	case req.Phase == v1.MemoryDumpUnmounting && req.FileName != nil:
		val = *req.FileName
	case req.Phase == v1.MemoryDumpFailed:
		val = dumpFailed
	default:
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(vm.Namespace).Get(req.ClaimName)
	if err != nil {
		return fmt.Errorf("memory dump of VirtualMachine %s/%s: claim %s: %w", vm.Namespace, vm.Name, req.ClaimName, err)
	}
	if claim.Annotations[v1.PVCMemoryDumpAnnotation] == val {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1.PVCMemoryDumpAnnotation: val}}})
	if err != nil {
		return err
	}
	if _, err := c.claimClient.PersistentVolumeClaims(vm.Namespace).Patch(ctx, req.ClaimName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("memory dump of VirtualMachine %s/%s: annotating claim %s: %w", vm.Namespace, vm.Name, req.ClaimName, err)
	}
	return nil
}

// memoryDumpRequest is the VM's memoryDumpRequest moved on by what its
// instance reports, as KubeVirt's: Associating → InProgress once the
// instance has the volume; InProgress → Unmounting (with the file and the
// times) or Failed (with the message) as the volume's dump ends;
// Unmounting → Completed once the instance's status no longer lists the
// volume; a request to remove → Dissociating, then nil once the volume is
// gone.
func memoryDumpRequest(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) *v1.VirtualMachineMemoryDumpRequest {
	old := vm.Status.MemoryDumpRequest
	if old == nil {
		return nil
	}
	req := old.DeepCopy()
	if req.Remove {
		req.Phase = v1.MemoryDumpDissociating
	}
	var status *v1.VolumeStatus
	inSpec := false
	if vmi != nil {
		for i := range vmi.Status.VolumeStatus {
			if vmi.Status.VolumeStatus[i].Name == req.ClaimName {
				status = &vmi.Status.VolumeStatus[i]
			}
		}
		inSpec = slices.ContainsFunc(vmi.Spec.Volumes, func(v v1.Volume) bool { return v.Name == req.ClaimName })
	}
	switch req.Phase {
	case v1.MemoryDumpAssociating:
		if inSpec {
			req.Phase = v1.MemoryDumpInProgress
		}
	case v1.MemoryDumpInProgress:
		if status == nil || status.MemoryDumpVolume == nil {
			break
		}
		req.StartTimestamp = status.MemoryDumpVolume.StartTimestamp
		switch status.Phase {
		case v1.MemoryDumpVolumeCompleted:
			req.Phase, req.EndTimestamp = v1.MemoryDumpUnmounting, status.MemoryDumpVolume.EndTimestamp
			name := status.MemoryDumpVolume.TargetFileName
			req.FileName = &name
		case v1.MemoryDumpVolumeFailed:
			req.Phase, req.Message, req.EndTimestamp = v1.MemoryDumpFailed, status.Message, status.MemoryDumpVolume.EndTimestamp
		}
	case v1.MemoryDumpUnmounting:
		if status == nil && !inSpec {
			req.Phase = v1.MemoryDumpCompleted
		}
	case v1.MemoryDumpDissociating:
		if status == nil && !inSpec {
			return nil
		}
	}
	return req
}
