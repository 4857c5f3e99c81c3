package vmcontrol

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/export"
	"github.com/vmkit/vmkit/vmcontrol/vmi"
)

// The informers' transforms: what the caches keep of each object. Each
// cached object costs memory for as long as the object exists, so the
// caches keep only what the controllers read.

// stripManagedFields drops metadata.managedFields, which the controllers
// never read and which are a large part of each object. Objects the
// controllers write back whole (VMIs) lose nothing by it: an update without
// managedFields leaves the stored ones alone.
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// lastAppliedAnnotation is where kubectl apply keeps the whole manifest it
// applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// slimVM drops managedFields and kubectl's copy of the applied manifest
// from a VM: the VM controller writes VMs only through the status
// subresource, which ignores metadata, so nothing dropped here is written
// back.
func slimVM(obj any) (any, error) {
	if vm, ok := obj.(*v1.VirtualMachine); ok {
		delete(vm.Annotations, lastAppliedAnnotation)
	}
	return stripManagedFields(obj)
}

// slimPod is the launcher-pod informer's transform. The VMI controller
// reads a launcher pod's identity (name, namespace, UID, the controlling
// VMI and the kubevirt.io/created-by label it is indexed by), whether it is
// being deleted, its node, phase and QoS class, the readiness of its compute
// container, and its Ready and PodScheduled conditions (the node controller
// reads a subset: the label, node and phase). The rest of the
// spec and status, its other labels and its annotations are dropped: they
// are most of a launcher pod's size. Controllers needing more of the pod
// must read it from the API server.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return stripManagedFields(obj)
	}
	slim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
	}}
	// The VMI's UID, and on a migration's target pod the migration's UID
	// and name, which the migration controller finds it by.
	for _, k := range []string{v1.CreatedByLabel, v1.MigrationJobLabel} {
		if v, ok := pod.Labels[k]; ok {
			if slim.Labels == nil {
				slim.Labels = map[string]string{}
			}
			slim.Labels[k] = v
		}
	}
	if v, ok := pod.Annotations[migrationJobNameAnnotation]; ok {
		slim.Annotations = map[string]string{migrationJobNameAnnotation: v}
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		slim.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	slim.Spec.NodeName = pod.Spec.NodeName
	slim.Status.Phase = pod.Status.Phase
	slim.Status.QOSClass = pod.Status.QOSClass
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.PodScheduled {
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{
				Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == vmi.ComputeContainer {
			// Whether it started (the VMI's phase) and is ready (its
			// Ready condition, which follows a readiness probe).
			slim.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cs.Name, Ready: cs.Ready,
				State: corev1.ContainerState{Running: cs.State.Running}}}
		}
	}
	return slim, nil
}

// slimClaim is the claim informer's transform: the VMI controller reads
// whether a claim exists, whether it is being deleted, its volume mode and
// phase, and for status.volumeStatus its requests, the bound volume's
// capacity and CDI's preallocation annotations, the migration controller its
// access modes (ReadWriteMany can migrate), the VM controller the labels
// naming a default instance type and preference, the export controller
// CDI's content-type annotation and the memory dump annotation it writes,
// the snapshot controller the StorageClass;
// the rest (other labels and annotations, conditions) is dropped.
func slimClaim(obj any) (any, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return stripManagedFields(obj)
	}
	var labels map[string]string
	for _, k := range []string{instancetype.DefaultInstancetypeLabel, instancetype.DefaultInstancetypeKindLabel, instancetype.DefaultPreferenceLabel, instancetype.DefaultPreferenceKindLabel} {
		if v, ok := pvc.Labels[k]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	var annotations map[string]string
	for k, v := range pvc.Annotations {
		if strings.HasSuffix(k, "/storage.preallocation") || strings.HasSuffix(k, "/storage.thick-provisioned") || k == export.ContentTypeAnnotation || k == v1.PVCMemoryDumpAnnotation {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pvc.Name, Namespace: pvc.Namespace, UID: pvc.UID, Labels: labels, Annotations: annotations,
			ResourceVersion: pvc.ResourceVersion, DeletionTimestamp: pvc.DeletionTimestamp},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: pvc.Spec.VolumeMode, AccessModes: pvc.Spec.AccessModes, StorageClassName: pvc.Spec.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{Requests: pvc.Spec.Resources.Requests}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: pvc.Status.Phase, AccessModes: pvc.Status.AccessModes, Capacity: pvc.Status.Capacity},
	}, nil
}

// slimNode is the node informer's transform: the node controller reads a
// node's name, the node agent's schedulable label and heartbeat annotation,
// and the resourceVersion it patches the label at, the evacuation controller
// its taints. The rest (the status with its image list, the other labels
// and annotations, the rest of the spec) is dropped.
func slimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return stripManagedFields(obj)
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion,
		CreationTimestamp: node.CreationTimestamp, DeletionTimestamp: node.DeletionTimestamp,
	}}
	if v, ok := node.Labels[v1.NodeSchedulable]; ok {
		slim.Labels = map[string]string{v1.NodeSchedulable: v}
	}
	if v, ok := node.Annotations[v1.VirtHandlerHeartbeat]; ok {
		slim.Annotations = map[string]string{v1.VirtHandlerHeartbeat: v}
	}
	// The evacuation controller reads the kubevirt.io/drain taint.
	slim.Spec.Taints = node.Spec.Taints
	return slim, nil
}

// migrationJobNameAnnotation on a migration's target pod holds the
// migration's name (KubeVirt's kubevirt.io/migrationJobName).
const migrationJobNameAnnotation = "kubevirt.io/migrationJobName"
