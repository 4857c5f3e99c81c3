package containerdisk

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// qcow2Header returns a qcow2 header of the version, with a backing file
// name when backing is not empty (stored after the header), and the
// incompatible feature bits of version 3, followed by payload.
func qcow2Header(version uint32, backing string, incompatible uint64, payload string) []byte {
	h := make([]byte, 104)
	copy(h, "QFI\xfb")
	binary.BigEndian.PutUint32(h[4:], version)
	if backing != "" {
		binary.BigEndian.PutUint64(h[8:], uint64(len(h)))
		binary.BigEndian.PutUint32(h[16:], uint32(len(backing)))
	}
	binary.BigEndian.PutUint64(h[qcow2IncompatibleOffset:], incompatible)
	return append(append(h, backing...), payload...)
}

// writeFile writes data to dir/name and returns its path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newRegistry starts go-containerregistry's in-memory registry on
// 127.0.0.1 (plain HTTP, as a local registry is) and returns its host.
func newRegistry(t testing.TB) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func mustImage(t testing.TB, path string, opts Options) v1.Image {
	t.Helper()
	disk, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Image(disk, opts)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// push pushes img to ref and returns the manifest digest the registry
// keeps.
func push(t testing.TB, ref string, img v1.Image) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	got, err := remote.Head(r)
	if err != nil {
		t.Fatal(err)
	}
	return got.Digest
}

// entry is what a test checks of a tar entry.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	Uname    string
	ModTime  time.Time
	Content  string
}

// layerEntries reads the image's only layer (gunzipped from the blob).
func layerEntries(t testing.TB, img v1.Image) []entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed() // gunzips the compressed blob
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime.UTC(), string(data)})
	}
	return out
}

// TestPushAndPull pushes a container disk to a registry, pulls it back by
// digest and checks what a launcher pod would see: the disk at
// disk/<name>, owned by qemu, read-only, equal to the file; an OCI image
// for linux/amd64 without an entrypoint.
func TestPushAndPull(t *testing.T) {
	data := qcow2Header(3, "", 0, "guest data")
	path := writeFile(t, t.TempDir(), "fedora.qcow2", data)
	disk, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if disk.Format != QCOW2 || disk.Size != int64(len(data)) {
		t.Errorf("Inspect = %+v, want qcow2 of %d bytes", disk, len(data))
	}
	img, err := Image(disk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	host := newRegistry(t)
	digest := push(t, host+"/disks/fedora:v1", img)

	pulled, err := remote.Image(mustParse(t, host+"/disks/fedora@"+digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(0, 0).UTC()
	want := []entry{
		{Name: "disk/", Type: tar.TypeDir, Mode: 0o555, UID: 107, GID: 107, ModTime: epoch},
		{Name: "disk/fedora.qcow2", Type: tar.TypeReg, Mode: 0o440, UID: 107, GID: 107, ModTime: epoch, Content: string(data)},
	}
	if d := cmp.Diff(want, layerEntries(t, pulled)); d != "" {
		t.Errorf("layer (-want +got):\n%s", d)
	}

	m, err := pulled.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest %s with config %s and layers %+v, want OCI's, one gzip layer", m.MediaType, m.Config.MediaType, m.Layers)
	}
	cf, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(epoch) {
		t.Errorf("config %s/%s created %s, want linux/amd64 at the epoch", cf.OS, cf.Architecture, cf.Created)
	}
	if len(cf.Config.Entrypoint) != 0 || len(cf.Config.Cmd) != 0 {
		t.Errorf("config has entrypoint %q, cmd %q; want none", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if len(cf.RootFS.DiffIDs) != 1 || len(cf.History) != 1 || !strings.Contains(cf.History[0].CreatedBy, "/disk/fedora.qcow2 (qcow2") {
		t.Errorf("config rootfs %+v, history %+v: want one layer with its history", cf.RootFS, cf.History)
	}
}

func mustParse(t testing.TB, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDigestIsReproducible: the same content gives the same digest,
// whatever the file's directory, name on disk, times and the pushes; the
// name in the image, the architecture and the time change it.
func TestDigestIsReproducible(t *testing.T) {
	data := bytes.Repeat([]byte("raw disk sector "), 4096)
	a := writeFile(t, t.TempDir(), "disk.img", data)
	b := writeFile(t, t.TempDir(), "copy.img", data)
	if err := os.Chtimes(b, time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	host := newRegistry(t)
	first := push(t, host+"/disk:a", mustImage(t, a, Options{}))
	second := push(t, host+"/disk:a", mustImage(t, a, Options{}))
	other := push(t, host+"/other:b", mustImage(t, b, Options{Name: "disk.img"}))
	if first != second || first != other {
		t.Errorf("digests %s, %s (pushed again), %s (a copy): want one", first, second, other)
	}
	for _, opts := range []Options{
		{Name: "other.img"},
		{Architecture: "arm64"},
		{Created: time.Unix(1700000000, 0)},
	} {
		d, err := mustImage(t, a, opts).Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d == first {
			t.Errorf("Options %+v: same digest as the defaults'", opts)
		}
	}
	// Sub-second times are dropped, as tar and SOURCE_DATE_EPOCH have none.
	d1, _ := mustImage(t, a, Options{Created: time.Unix(1700000000, 0)}).Digest()
	d2, _ := mustImage(t, a, Options{Created: time.Unix(1700000000, 999)}).Digest()
	if d1 != d2 {
		t.Errorf("digests %s and %s for times within one second", d1, d2)
	}
}

// TestArchitecture: --arch is the config's architecture; unknown ones are
// refused.
func TestArchitecture(t *testing.T) {
	path := writeFile(t, t.TempDir(), "disk.img", []byte("raw"))
	host := newRegistry(t)
	for _, arch := range []string{"arm64", "s390x"} {
		digest := push(t, host+"/disk:"+arch, mustImage(t, path, Options{Architecture: arch}))
		img, err := remote.Image(mustParse(t, host+"/disk@"+digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != arch || cf.Variant != "" {
			t.Errorf("config platform %s/%s/%s, want linux/%s", cf.OS, cf.Architecture, cf.Variant, arch)
		}
	}
	disk, _ := Inspect(path)
	_, err := Image(disk, Options{Architecture: "x86_64"})
	if err == nil || err.Error() != `architecture "x86_64" is not supported: use amd64, arm64, s390x` {
		t.Errorf("x86_64: error %v", err)
	}
}

func TestSourceDateEpoch(t *testing.T) {
	for value, want := range map[string]time.Time{"": time.Unix(0, 0), "0": time.Unix(0, 0), "1700000000": time.Unix(1700000000, 0)} {
		got, err := SourceDateEpoch(value)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("SourceDateEpoch(%q) = %v, %v; want %v UTC", value, got, err, want)
		}
	}
	for _, value := range []string{"yesterday", "-1", "1.5"} {
		if _, err := SourceDateEpoch(value); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH=") {
			t.Errorf("SourceDateEpoch(%q): error %v, want one naming SOURCE_DATE_EPOCH", value, err)
		}
	}
}

// TestInspect: which files are disks, and the errors for those that are
// not, each naming the file.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.qcow2")
	if err := os.Symlink(writeFile(t, dir, "target.qcow2", qcow2Header(2, "", 0, "")), link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		format  Format
		wantErr string // the whole message, with %s for the path
		refers  bool   // errors.Is(err, ErrReferencesFile)
	}{
		{name: "raw", path: writeFile(t, dir, "disk.img", []byte("\x00\x00boot")), format: Raw},
		{name: "one byte", path: writeFile(t, dir, "one", []byte("Q")), format: Raw},
		{name: "qcow2 magic alone is raw", path: writeFile(t, dir, "qfi", []byte("QFI")), format: Raw},
		{name: "qcow2 v2", path: writeFile(t, dir, "v2.qcow2", qcow2Header(2, "", 0, "x")), format: QCOW2},
		{name: "qcow2 v3", path: writeFile(t, dir, "v3.qcow2", qcow2Header(3, "", 1, "x")), format: QCOW2},
		{name: "symbolic link", path: link, format: QCOW2},
		{name: "backing file", path: writeFile(t, dir, "overlay.qcow2", qcow2Header(3, "/var/lib/images/base.qcow2", 0, "")),
			wantErr: `%s: a qcow2 image that refers to another file cannot be a container disk: it has a backing file ("/var/lib/images/base.qcow2"); make a standalone image with qemu-img convert -O qcow2 <this image> <new file>`,
			refers:  true},
		{name: "backing file name past the end", path: writeFile(t, dir, "cut.qcow2", qcow2Header(2, "base.qcow2", 0, "")[:110]),
			wantErr: `%s: a qcow2 image that refers to another file cannot be a container disk: it has a backing file (name of 10 bytes at offset 104, unreadable: EOF); make a standalone image with qemu-img convert -O qcow2 <this image> <new file>`,
			refers:  true},
		{name: "external data file", path: writeFile(t, dir, "data.qcow2", qcow2Header(3, "", qcow2ExternalDataFile, "")),
			wantErr: `%s: a qcow2 image that refers to another file cannot be a container disk: it has an external data file; make a standalone image with qemu-img convert -O qcow2 <this image> <new file>`,
			refers:  true},
		{name: "qcow2 version 4", path: writeFile(t, dir, "v4.qcow2", qcow2Header(4, "", 0, "")),
			wantErr: "%s: qcow2 version 4 is not supported (2 and 3 are)"},
		{name: "truncated qcow2", path: writeFile(t, dir, "short.qcow2", []byte("QFI\xfb\x00\x00\x00\x03")),
			wantErr: "%s: truncated qcow2 header"},
		{name: "truncated qcow2 v3", path: writeFile(t, dir, "short3.qcow2", qcow2Header(3, "", 0, "")[:72]),
			wantErr: "%s: truncated qcow2 header"},
		{name: "empty", path: writeFile(t, dir, "empty.img", nil), wantErr: "%s is empty, not a disk image"},
		{name: "directory", path: dir, wantErr: "%s is a directory, not a disk image file"},
		{name: "named pipe", path: fifo, wantErr: "%s is not a regular file (a named pipe): a container disk holds a copy of a disk image file"},
		{name: "missing", path: filepath.Join(dir, "nope.img"), wantErr: "open %s: no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var disk Disk
			var err error
			if tc.path == fifo {
				// Opening a FIFO blocks until a writer comes: one does.
				go func() {
					if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
						w.Close()
					}
				}()
			}
			disk, err = Inspect(tc.path)
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "%s", tc.path)
				if err == nil || err.Error() != want {
					t.Fatalf("Inspect(%s): error %v, want %q", tc.path, err, want)
				}
				if errors.Is(err, ErrReferencesFile) != tc.refers {
					t.Errorf("errors.Is(%v, ErrReferencesFile) = %v, want %v", err, !tc.refers, tc.refers)
				}
				return
			}
			if err != nil {
				t.Fatalf("Inspect(%s): %v", tc.path, err)
			}
			if disk.Format != tc.format || disk.Path != tc.path {
				t.Errorf("Inspect(%s) = %+v, want format %s", tc.path, disk, tc.format)
			}
		})
	}
}

func TestDiskName(t *testing.T) {
	path := writeFile(t, t.TempDir(), "disk.img", []byte("raw"))
	disk, _ := Inspect(path)
	for _, bad := range []string{"a/b", "..", ".", "/", "x\x00"} {
		if _, err := Image(disk, Options{Name: bad}); err == nil || !strings.HasPrefix(err.Error(), "disk name ") {
			t.Errorf("name %q: error %v, want one naming the disk name", bad, err)
		}
	}
	img, err := Image(disk, Options{Name: "rhel 9.raw"})
	if err != nil {
		t.Fatal(err)
	}
	if got := layerEntries(t, img)[1].Name; got != "disk/rhel 9.raw" {
		t.Errorf("entry %q, want disk/rhel 9.raw", got)
	}
}

// TestFileChangedAfterInspect: a layer whose file changed refuses to be
// read instead of uploading content that does not match its digest.
func TestFileChangedAfterInspect(t *testing.T) {
	path := writeFile(t, t.TempDir(), "disk.img", []byte("first"))
	img := mustImage(t, path, Options{})
	if err := os.WriteFile(path, []byte("second, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	if err == nil || !strings.Contains(err.Error(), path+" changed since it was inspected") {
		t.Errorf("reading the layer of a changed file: error %v", err)
	}
	host := newRegistry(t)
	if err := remote.Write(mustParse(t, host+"/disk:x"), img); err == nil || !strings.Contains(err.Error(), "changed since it was inspected") {
		t.Errorf("pushing the image of a changed file: error %v", err)
	}
}

// FuzzSniff: any header is raw, qcow2 or an error, never a panic, and a
// qcow2 verdict means no backing file.
func FuzzSniff(f *testing.F) {
	f.Add(qcow2Header(3, "", 0, ""))
	f.Add(qcow2Header(2, "base.qcow2", 0, ""))
	f.Add(qcow2Header(3, "", qcow2ExternalDataFile, ""))
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x04\x00"))
	f.Add([]byte("raw"))
	f.Fuzz(func(t *testing.T, data []byte) {
		hdr := data[:min(len(data), qcow2HeaderLen)]
		format, err := sniff(hdr, bytes.NewReader(data))
		switch {
		case err != nil:
			if format != "" || !bytes.HasPrefix(data, qcow2Magic) {
				t.Fatalf("sniff = %q, %v", format, err)
			}
		case format == QCOW2:
			if binary.BigEndian.Uint64(hdr[8:16]) != 0 {
				t.Fatal("a qcow2 image with a backing file was accepted")
			}
		case format != Raw || bytes.HasPrefix(data, qcow2Magic):
			t.Fatalf("sniff = %q for %q", format, hdr)
		}
	})
}

// BenchmarkImage measures the pass over the file that computes the
// layer's digests (gzip is most of it), on 64 MiB of text-like data.
func BenchmarkImage(b *testing.B) {
	data := bytes.Repeat([]byte("a disk sector of a guest's file system, not all zeros\n"), 64<<20/54)
	path := writeFile(b, b.TempDir(), "disk.img", data)
	disk, err := Inspect(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(disk.Size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Image(disk, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
