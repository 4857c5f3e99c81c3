package vm

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestNewInstanceIsLiveMigratable: a new instance carries its
// LiveMigratable condition and migration method from the start, computed
// from its claims, so the VM's first status has it; without a claim cache
// it is left to the VMI controller.
func TestNewInstanceIsLiveMigratable(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, claim := range []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "rwx", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rwo", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}},
	} {
		if err := idx.Add(claim); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	c := &Controller{claims: corelisters.NewPersistentVolumeClaimLister(idx), now: func() time.Time { return now }}
	vmiWith := func(claim string) *v1.VirtualMachineInstance {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "default"}}
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
		vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
		vmi.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}
		return vmi
	}
	for _, tc := range []struct {
		claim  string
		want   corev1.ConditionStatus
		method v1.VirtualMachineInstanceMigrationMethod
	}{{"rwx", corev1.ConditionTrue, v1.LiveMigration}, {"rwo", corev1.ConditionFalse, v1.BlockMigration}} {
		vmi := vmiWith(tc.claim)
		c.setMigratable(vmi)
		cond := vmi.VMICondition(v1.VirtualMachineInstanceIsMigratable)
		if cond == nil || cond.Status != tc.want || !cond.LastTransitionTime.Time.Equal(now) || vmi.Status.MigrationMethod != tc.method {
			t.Errorf("claim %s: condition %+v, method %q; want %s, %s", tc.claim, cond, vmi.Status.MigrationMethod, tc.want, tc.method)
		}
	}
	vmi := vmiWith("rwx")
	(&Controller{now: time.Now}).setMigratable(vmi)
	if len(vmi.Status.Conditions) != 0 || vmi.Status.MigrationMethod != "" {
		t.Errorf("without a claim cache: %+v", vmi.Status)
	}
}
