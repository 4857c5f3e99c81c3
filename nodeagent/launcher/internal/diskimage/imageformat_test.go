package diskimage

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qemuImg returns qemu-img's path, failing the test when it is missing.
func qemuImg(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Fatal("qemu-img is not installed (make test-deps installs QEMU: hack/setup-libvirt.sh)")
	}
	return p
}

// A container disk, or the image behind an ephemeral volume, that is a
// qcow2 with a backing file or an external data file is refused before
// qemu-img or QEMU open it (review N12: the image's author chose the path,
// here /etc/hostname); plain qcow2 and raw images are used.
func TestOverlayRefusesImagesReferringToFiles(t *testing.T) {
	img := qemuImg(t)
	ctx := context.Background()
	dir := t.TempDir()
	// mk makes a 1 MiB image name with qemu-img create's options args.
	mk := func(name string, args ...string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		args = append(append([]string{"create", "-q"}, args...), p, "1M")
		if out, err := exec.Command(img, args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create %s: %v: %s", name, err, out)
		}
		return p
	}
	for _, tc := range []struct {
		name, image, want, refused string
	}{
		{"raw", mk("raw.img", "-f", "raw"), "raw", ""},
		{"qcow2", mk("plain.qcow2", "-f", "qcow2"), "qcow2", ""},
		{"qcow2 v2", mk("v2.qcow2", "-f", "qcow2", "-o", "compat=0.10"), "qcow2", ""},
		{"backing file", mk("backed.qcow2", "-f", "qcow2", "-b", "/etc/hostname", "-F", "raw", "-u"), "", "backing file"},
		{"backing file, v2", mk("backedv2.qcow2", "-f", "qcow2", "-o", "compat=0.10", "-b", "/etc/hostname", "-F", "raw", "-u"), "", "backing file"},
		{"external data file", mk("data.qcow2", "-f", "qcow2", "-o", "data_file="+filepath.Join(dir, "data.raw")), "", "external data file"},
	} {
		format, err := imageFormat(tc.image)
		if tc.refused == "" {
			if err != nil || format != tc.want {
				t.Errorf("%s: imageFormat = %q, %v; want %q", tc.name, format, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, errImageReferencesFile) || !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s: imageFormat = %q, %v; want it refused for its %s", tc.name, format, err, tc.refused)
		}
		out := filepath.Join(dir, "overlay-"+strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{img, ""} {
			if ds, err := overlay(ctx, q, tc.image, out); !errors.Is(err, errImageReferencesFile) {
				t.Errorf("%s: overlay (qemu-img %q) = %+v, %v; want it refused", tc.name, q, ds, err)
			}
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("%s: overlay left %d files", tc.name, len(entries))
		}
	}
}

func TestCheckQCOW2Header(t *testing.T) {
	header := func(version uint32, backing uint64, incompatible uint64) []byte {
		h := make([]byte, qcow2HeaderLen)
		copy(h, "QFI\xfb")
		binary.BigEndian.PutUint32(h[4:], version)
		binary.BigEndian.PutUint64(h[8:], backing)
		binary.BigEndian.PutUint64(h[qcow2IncompatibleOffset:], incompatible)
		return h
	}
	for _, tc := range []struct {
		name string
		hdr  []byte
		ok   bool
	}{
		{"v3", header(3, 0, 0), true},
		{"v2, bit 2 means nothing", header(2, 0, qcow2ExternalDataFile), true},
		{"v3, other incompatible bits", header(3, 0, 1|2), true},
		{"backing file", header(3, 0x1000, 0), false},
		{"external data file", header(3, 0, qcow2ExternalDataFile), false},
		{"version 4", header(4, 0, 0), false},
		{"version 1", header(1, 0, 0), false},
		{"truncated", header(3, 0, 0)[:12], false},
		{"v3 truncated", header(3, 0, 0)[:72], false},
	} {
		if err := checkQCOW2Header(tc.hdr); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
