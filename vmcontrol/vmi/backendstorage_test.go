package vmi

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// claimsOf adapts a fake clientset's claims to kubeclient.PersistentVolumeClaimsGetter.
type claimsOf struct{ kube *kubefake.Clientset }

func (c claimsOf) PersistentVolumeClaims(ns string) kubeclient.PersistentVolumeClaimInterface {
	return c.kube.CoreV1().PersistentVolumeClaims(ns)
}

// TestBackendStorageClaim: a VMI of a VM with a persistent TPM gets its
// backend-storage claim before its launcher pod, as KubeVirt's: named
// persistent-state-for-<name>, 10Mi, ReadWriteOnce Filesystem, of the
// KubeVirt CR's vmStateStorageClass, owned by the VM (so the state outlives
// the VMI). A claim that exists is used as it is.
func TestBackendStorageClaim(t *testing.T) {
	vm := metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "vmi", UID: "vm-uid", Controller: v1.BoolPtr(true), BlockOwnerDeletion: v1.BoolPtr(true)}
	vmi := newVMI("")
	vmi.OwnerReferences = []metav1.OwnerReference{vm}
	vmi.Spec.Domain.Devices.TPM = &v1.TPMDevice{Persistent: v1.BoolPtr(true)}
	h := newClaimHarness(t, fakeRenderer{}, vmi)
	kvs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "kubevirt"}}
	kv.Spec.Configuration.VMStateStorageClass = "fast"
	_ = kvs.Add(kv)
	h.c.kubevirts = kvs
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	claim, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "persistent-state-for-vmi", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("backend-storage claim: %v", err)
	}
	fs, class := corev1.PersistentVolumeFilesystem, "fast"
	want := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "persistent-state-for-vmi", Namespace: "ns", Labels: map[string]string{BackendStorageLabel: "vmi"},
			OwnerReferences: []metav1.OwnerReference{vm}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:       &fs,
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
		},
	}
	if diff := cmp.Diff(want, claim, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("claim (-want +got):\n%s", diff)
	}
	pods, _ := h.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 {
		t.Errorf("%d launcher pods, want 1 after the claim", len(pods.Items))
	}

	// A claim already there (the previous VMI's, holding the state) is
	// neither replaced nor changed.
	vmi2 := newVMI("")
	vmi2.OwnerReferences = []metav1.OwnerReference{vm}
	vmi2.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{Persistent: v1.BoolPtr(true)}}}
	old := want.DeepCopy()
	old.Spec.StorageClassName = nil
	h = newClaimHarness(t, fakeRenderer{}, vmi2, old)
	if _, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Create(context.Background(), old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, a := range h.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "persistentvolumeclaims" {
			creates++
		}
	}
	if got, _ := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), old.Name, metav1.GetOptions{}); creates != 1 || got.Spec.StorageClassName != nil {
		t.Errorf("%d claim creations (want only the test's), claim class %v; the existing claim must stay as it is", creates, got.Spec.StorageClassName)
	}

	// A VMI without a VM owns its claim itself.
	direct := newVMI("")
	direct.Spec.Domain.Devices.TPM = &v1.TPMDevice{Persistent: v1.BoolPtr(true)}
	c := backendStorageClaim(direct, nil)
	if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind != "VirtualMachineInstance" || c.OwnerReferences[0].UID != direct.UID || c.Spec.StorageClassName != nil {
		t.Errorf("claim of a VMI without a VM: owners %+v, class %v; want the VMI, the default class", c.OwnerReferences, c.Spec.StorageClassName)
	}
}
