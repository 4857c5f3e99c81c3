package diskimage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestExpandImageOffline(t *testing.T) {
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, []byte("boot sector"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := &v1.PersistentVolumeClaimInfo{ClaimName: "c", Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}}
	if err := expandImageOffline(context.Background(), img, info); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(img)
	if err != nil || len(data) != 10<<20 || string(data[:11]) != "boot sector" {
		t.Errorf("grown image: %d bytes starting %q (%v), want 10 MiB keeping its data", len(data), data[:min(11, len(data))], err)
	}
	bad := info.DeepCopy()
	bad.FilesystemOverhead = ptr("1.5")
	if _, err := imageSize(img, bad); err == nil {
		t.Error("an overhead of 1.5 was accepted")
	}
}
