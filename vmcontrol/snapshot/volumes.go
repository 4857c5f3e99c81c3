package snapshot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// VolumeSnapshotStatuses is KubeVirt's vm.status.volumeSnapshotStatuses
// where no StorageClass has a VolumeSnapshotClass: every volume of the
// template, in order, disabled with KubeVirt's reason. claim returns the
// VM's claim of the given name, nil when there is none. The snapshot
// controller keeps them; the VM controller writes them with its own
// status, so that a new VM costs one status write fewer.
func VolumeSnapshotStatuses(vm *v1.VirtualMachine, claim func(name string) *corev1.PersistentVolumeClaim) []v1.VolumeSnapshotStatus {
	if vm.Spec.Template == nil || len(vm.Spec.Template.Spec.Volumes) == 0 {
		return nil
	}
	out := make([]v1.VolumeSnapshotStatus, 0, len(vm.Spec.Template.Spec.Volumes))
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		st := v1.VolumeSnapshotStatus{Name: vol.Name}
		name := claimName(vol)
		switch {
		case name == "":
			st.Reason = fmt.Sprintf("Snapshot is not supported for this volumeSource type [%s]", vol.Name)
		case claim(name) == nil:
			st.Reason = "PVC not found"
		default:
			st.Reason = fmt.Sprintf("No VolumeSnapshotClass: Volume snapshots are not configured for this StorageClass [%s] [%s]",
				storageClass(claim(name)), vol.Name)
		}
		out = append(out, st)
	}
	return out
}

// claimName is the claim of a persistentVolumeClaim, dataVolume or
// memoryDump volume ("" for other sources).
func claimName(vol v1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.DataVolume != nil:
		return vol.DataVolume.Name
	case vol.MemoryDump != nil:
		return vol.MemoryDump.ClaimName
	}
	return ""
}

func storageClass(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName == nil {
		return ""
	}
	return *pvc.Spec.StorageClassName
}

func (c *Controller) claim(namespace string) func(string) *corev1.PersistentVolumeClaim {
	return func(name string) *corev1.PersistentVolumeClaim {
		obj, ok, _ := c.claims.GetByKey(namespace + "/" + name)
		if !ok {
			return nil
		}
		return obj.(*corev1.PersistentVolumeClaim)
	}
}

// syncVolumeSnapshotStatuses writes a VM's volumeSnapshotStatuses when
// they changed. A VM the VM controller has not synced yet (no
// status.observedGeneration) is left to it: its first status write
// carries them, and a write of their own would cost every new VM one more.
func (c *Controller) syncVolumeSnapshotStatuses(ctx context.Context, key string) error {
	vm := c.vm(key)
	if vm == nil || vm.DeletionTimestamp != nil || vm.Status.ObservedGeneration == 0 {
		return nil
	}
	want := VolumeSnapshotStatuses(vm, c.claim(vm.Namespace))
	if equality.Semantic.DeepEqual(want, vm.Status.VolumeSnapshotStatuses) {
		return nil
	}
	return c.updateVMStatus(ctx, vm, func(st *v1.VirtualMachineStatus) { st.VolumeSnapshotStatuses = want })
}

// vm is the cached VM of key (namespace/name), or nil.
func (c *Controller) vm(key string) *v1.VirtualMachine {
	obj, ok, _ := c.vms.GetByKey(key)
	if !ok {
		return nil
	}
	return obj.(*v1.VirtualMachine)
}

// updateVMStatus applies edit to the VM's status and writes it, reading the
// VM again on a conflict (the VM controller writes the status too).
func (c *Controller) updateVMStatus(ctx context.Context, vm *v1.VirtualMachine, edit func(*v1.VirtualMachineStatus)) error {
	vms := c.cfg.Client.VirtualMachines(vm.Namespace)
	cur := vm.DeepCopy()
	for range 3 {
		edit(&cur.Status)
		_, err := vms.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("updating the status of VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
			}
			return nil
		}
		if cur, err = vms.Get(ctx, vm.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("reading VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
		}
	}
	return fmt.Errorf("updating the status of VirtualMachine %s/%s: conflicts", vm.Namespace, vm.Name)
}
