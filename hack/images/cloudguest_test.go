package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCloudGuestImage: the cloud guest's disk is a container disk as
// KubeVirt lays them out (the image alone under /disk/), on the shared base
// layer, tagged :latest too, as examples/vm-cloud.yaml names it.
func TestCloudGuestImage(t *testing.T) {
	epoch := time.Unix(0, 0)
	b := testBuilder(t, "kernel", "initramfs", time.Now(), epoch)
	b.opts.cloudGuest = filepath.Join(t.TempDir(), "cloud-guest")
	if err := os.MkdirAll(b.opts.cloudGuest, 0o755); err != nil {
		t.Fatal(err)
	}
	s := spec(t, b, "cloud-guest")
	if diff := cmp.Diff([]string{"vmkit/cloud-guest:devel", "vmkit/cloud-guest:latest"}, s.refs); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if _, err := s.layers(t.Context()); err == nil || !strings.Contains(err.Error(), "hack/make-cloud-guest.sh") {
		t.Errorf("without the disk: got error %v, want one naming hack/make-cloud-guest.sh", err)
	}

	const disk = "QFI\xfb a qcow2 disk"
	if err := os.WriteFile(filepath.Join(b.opts.cloudGuest, "debian-12-cloud.qcow2"), []byte(disk), 0o600); err != nil {
		t.Fatal(err)
	}
	layers, err := s.layers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	base, err := b.baseLayer()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 || layers[0] != base {
		t.Fatalf("got %d layers, want the base layer and the disk's", len(layers))
	}
	want := []tarEntry{
		{Name: "disk/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "disk/debian-12-cloud.qcow2", Type: tar.TypeReg, Mode: 0o644, Size: int64(len(disk)), Content: disk},
	}
	if diff := cmp.Diff(want, readLayer(t, layers[1], epoch)); diff != "" {
		t.Errorf("disk layer (-want +got):\n%s", diff)
	}
}
