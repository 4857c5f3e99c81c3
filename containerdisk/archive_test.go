package containerdisk

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestWriteArchive reads the archive back both ways, as containerd (OCI
// layout: the manifest digest is the image's) and as docker load
// (manifest.json), and checks that it repeats byte for byte.
func TestWriteArchive(t *testing.T) {
	data := qcow2Header(3, "", 0, "guest")
	path := writeFile(t, t.TempDir(), "guest.qcow2", data)
	img := mustImage(t, path, Options{})
	tag, err := name.NewTag("disks/guest:v1")
	if err != nil {
		t.Fatal(err)
	}
	var archive, again bytes.Buffer
	if err := WriteArchive(&archive, img, tag); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(&again, mustImage(t, path, Options{}), tag); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(archive.Bytes(), again.Bytes()) {
		t.Error("two archives of the same file differ")
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	// As docker load reads it.
	file := writeFile(t, t.TempDir(), "image.tar", archive.Bytes())
	loaded, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(diskEntries(data), layerEntries(t, loaded)); d != "" {
		t.Errorf("docker archive's layer (-want +got):\n%s", d)
	}
	wantConfig, _ := img.ConfigName()
	if got, _ := loaded.ConfigName(); got != wantConfig {
		t.Errorf("docker archive's config %s, want %s", got, wantConfig)
	}

	// As containerd reads it: the OCI layout's index names the manifest.
	dir := untar(t, archive.Bytes())
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want ||
		im.Manifests[0].Annotations[annotationImageName] != "docker.io/disks/guest:v1" || im.Manifests[0].Annotations[annotationRefName] != "v1" {
		t.Fatalf("index.json %+v, want the manifest %s named docker.io/disks/guest:v1", im.Manifests, want)
	}
	fromLayout, err := index.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(diskEntries(data), layerEntries(t, fromLayout)); d != "" {
		t.Errorf("OCI layout's layer (-want +got):\n%s", d)
	}
}

// diskEntries are the layer's entries for a disk disk/guest.qcow2 holding
// data, dated at the epoch.
func diskEntries(data []byte) []entry {
	epoch := time.Unix(0, 0).UTC()
	return []entry{
		{Name: "disk/", Type: tar.TypeDir, Mode: 0o555, UID: 107, GID: 107, ModTime: epoch},
		{Name: "disk/guest.qcow2", Type: tar.TypeReg, Mode: 0o440, UID: 107, GID: 107, ModTime: epoch, Content: string(data)},
	}
}

// untar unpacks a tar of regular files and directories into a new
// directory.
func untar(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Dir(p), filepath.Base(p), b)
	}
}
