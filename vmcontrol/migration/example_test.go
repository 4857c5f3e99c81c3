package migration_test

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

// LiveMigratable decides, from the spec and the claims' access modes, whether
// a VMI can live-migrate and whether its disks must be copied.
func ExampleLiveMigratable() {
	claims := map[string]*corev1.PersistentVolumeClaim{
		"shared": {Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}},
		"local":  {Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}},
	}
	lookup := func(_, name string) *corev1.PersistentVolumeClaim { return claims[name] }
	withVolume := func(src v1.VolumeSource) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "disk", VolumeSource: src}}}}
	}
	claim := func(name string) v1.VolumeSource {
		return v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
	}
	for _, vmi := range []*v1.VirtualMachineInstance{
		withVolume(v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora"}}),
		withVolume(claim("shared")),
		withVolume(claim("local")),
	} {
		cond, method := migration.LiveMigratable(vmi, lookup)
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s %s %s %s", cond.Status, method, cond.Reason, cond.Message)))
	}
	// Output:
	// True BlockMigration
	// True LiveMigration
	// False BlockMigration DisksNotLiveMigratable cannot migrate VMI: PVC local is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)
}
