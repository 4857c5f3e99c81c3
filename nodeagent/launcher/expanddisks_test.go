package launcher

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestLauncherExpandsDisks: with --expand-disks, a claim disk whose
// claim's capacity grows grows in the running guest to (1 - overhead) ×
// capacity, rounded down to 1 MiB, and never shrinks; without it nothing
// grows.
func TestLauncherExpandsDisks(t *testing.T) {
	for _, expand := range []bool{true, false} {
		f := startWith(t, func(c *Config) { c.ExpandDisks = expand })
		ctx := context.Background()
		vmi := testVMI()
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}})
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}})
		img := filepath.Join(f.cfg.HotplugDiskDir, "data", "disk.img")
		if err := os.MkdirAll(filepath.Dir(img), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(img, make([]byte, 4<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		capacity := func(q string) {
			vmi.Status.VolumeStatus = []v1.VolumeStatus{{Name: "data", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{
				ClaimName: "data", Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}, FilesystemOverhead: ptr("0.055")}}}
		}
		capacity("4Mi")
		for range 2 { // start, then attach
			if _, err := f.c.Sync(ctx, vmi); err != nil {
				t.Fatalf("Sync: %v", err)
			}
		}
		size := func() (uint64, int64) {
			st := f.l.Status()
			have, err := f.h.DiskCapacity(ctx, st.Domain, "sda")
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(img)
			if err != nil {
				t.Fatal(err)
			}
			return have, fi.Size()
		}
		if have, file := size(); have != 4<<20 || file != 4<<20 {
			t.Fatalf("before the claim grew: guest %d, file %d bytes; want 4 MiB (0.945 × 4Mi is less: no shrinking)", have, file)
		}
		capacity("64Mi")
		if _, err := f.c.Sync(ctx, vmi); err != nil {
			t.Fatalf("Sync after the claim grew: %v", err)
		}
		want := uint64(60 << 20) // 0.945 × 64 MiB = 60.48 MiB, rounded down to 1 MiB
		if !expand {
			want = 4 << 20
		}
		if have, file := size(); have != want || file != int64(want) {
			t.Errorf("expand %v: guest %d, file %d bytes after the claim grew to 64Mi; want %d", expand, have, file, want)
		}
	}
}
