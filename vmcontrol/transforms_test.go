package vmcontrol

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/vmi"
)

func TestSlimPodKeepsWhatTheVMIControllerReads(t *testing.T) {
	yes := true
	now := metav1.Now()
	ref := metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid", Controller: &yes}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "virt-launcher-vm-abcde", Namespace: "ns", UID: "pod-uid", ResourceVersion: "7",
			CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:          map[string]string{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: "vmi-uid", "team": "a"},
			Annotations:     map[string]string{"kubevirt.io/domain": "vm"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "x"}, ref},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			Finalizers:      []string{"f"},
		},
		Spec: corev1.PodSpec{NodeName: "node01", Containers: []corev1.Container{{Name: vmi.ComputeContainer, Image: "launcher"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes", LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "volumecontainerdisk", Ready: false, Image: "disk"},
				{Name: vmi.ComputeContainer, Ready: true, Image: "launcher", RestartCount: 2},
			},
		},
	}
	got, err := slimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "virt-launcher-vm-abcde", Namespace: "ns", UID: "pod-uid", ResourceVersion: "7",
			CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:          map[string]string{v1.CreatedByLabel: "vmi-uid"},
			OwnerReferences: []metav1.OwnerReference{ref},
		},
		Spec: corev1.PodSpec{NodeName: "node01"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes", LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: vmi.ComputeContainer, Ready: true}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimPod (-want +got):\n%s", diff)
	}
}

func TestSlimVMDropsKubectlsCopyAndManagedFields(t *testing.T) {
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm",
		Annotations:   map[string]string{lastAppliedAnnotation: `{"kind":"VirtualMachine"}`, "kubevirt.io/immediate-data-volume-creation": "false"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	got, err := slimVM(vm)
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm",
		Annotations: map[string]string{"kubevirt.io/immediate-data-volume-creation": "false"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimVM (-want +got):\n%s", diff)
	}
}

func TestSlimNodeKeepsWhatTheNodeControllerReads(t *testing.T) {
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "node01", UID: "node-uid", ResourceVersion: "9", CreationTimestamp: now,
			Labels:        map[string]string{v1.NodeSchedulable: "true", "kubernetes.io/hostname": "node01"},
			Annotations:   map[string]string{v1.VirtHandlerHeartbeat: "2026-11-24T10:00:00Z", "node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec:   corev1.NodeSpec{PodCIDR: "10.244.0.0/24"},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"quay.io/kubevirt/virt-launcher"}}}},
	}
	got, err := slimNode(node)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node01", UID: "node-uid", ResourceVersion: "9", CreationTimestamp: now,
		Labels:      map[string]string{v1.NodeSchedulable: "true"},
		Annotations: map[string]string{v1.VirtHandlerHeartbeat: "2026-11-24T10:00:00Z"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimNode (-want +got):\n%s", diff)
	}
	bare, err := slimNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node02", Labels: map[string]string{"a": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node02"}}, bare); diff != "" {
		t.Errorf("slimNode of a node without an agent (-want +got):\n%s", diff)
	}
}

func TestSlimClaimKeepsTheDefaultInstancetypeLabels(t *testing.T) {
	block, local := corev1.PersistentVolumeBlock, "local"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "ns", UID: "pvc-uid", ResourceVersion: "3",
			Labels:      map[string]string{"team": "a", instancetype.DefaultInstancetypeLabel: "u1.medium", instancetype.DefaultPreferenceLabel: "fedora"},
			Annotations: map[string]string{"a": "b", "cdi.kubevirt.io/storage.preallocation": "true", "cdi.kubevirt.io/storage.contentType": "kubevirt", "kubevirt.io/memory-dump": "vm-root-x.memory.dump"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: &block, StorageClassName: &local,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				Limits: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1040Mi")}},
	}
	got, err := slimClaim(pvc)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "ns", UID: "pvc-uid", ResourceVersion: "3",
			Labels:      map[string]string{instancetype.DefaultInstancetypeLabel: "u1.medium", instancetype.DefaultPreferenceLabel: "fedora"},
			Annotations: map[string]string{"cdi.kubevirt.io/storage.preallocation": "true", "cdi.kubevirt.io/storage.contentType": "kubevirt", "kubevirt.io/memory-dump": "vm-root-x.memory.dump"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: &block, StorageClassName: &local,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1040Mi")}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimClaim (-want +got):\n%s", diff)
	}
}
