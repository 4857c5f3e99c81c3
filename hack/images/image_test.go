package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testBuilder is a builder whose directories are below a fresh temporary
// directory, with a guest made of the given kernel and initramfs.
func testBuilder(t *testing.T, kernel, initramfs string, fileTime time.Time, epoch time.Time) *builder {
	t.Helper()
	dir := t.TempDir()
	o := options{
		out:   filepath.Join(dir, "out"),
		bin:   filepath.Join(dir, "bin"),
		guest: filepath.Join(dir, "guest"),
		work:  filepath.Join(dir, "work"),
		tag:   "devel",
		layer: layerOptions{ModTime: epoch, Level: gzip.DefaultCompression},
	}
	for _, d := range []string{o.out, o.guest, o.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"vmlinux": kernel, "initramfs-idle.cpio.gz": initramfs, "initramfs-agent.cpio.gz": initramfs + "agent",
		"disk.img": kernel + initramfs} {
		p := filepath.Join(o.guest, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fileTime, fileTime); err != nil {
			t.Fatal(err)
		}
	}
	return &builder{opts: o, layersDir: o.work, memo: make(map[string]*layer), report: io.Discard}
}

func spec(t *testing.T, b *builder, name string) imageSpec {
	t.Helper()
	for _, s := range b.images() {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no image %s", name)
	return imageSpec{}
}

// built is what a test needs to know of a built image.
type built struct {
	digest, base, top v1.Hash
	archive           []byte
}

func buildTinyGuest(t *testing.T, b *builder) built {
	t.Helper()
	img, err := b.buildImage(context.Background(), spec(t, b, "tiny-guest"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 {
		t.Fatalf("tiny-guest has %d layers, want 2", len(layers))
	}
	base, _ := layers[0].Digest()
	top, _ := layers[1].Digest()
	archive, err := os.ReadFile(filepath.Join(b.opts.out, "tiny-guest.tar"))
	if err != nil {
		t.Fatal(err)
	}
	return built{digest: d, base: base, top: top, archive: archive}
}

// TestReproducible builds the tiny-guest image twice from equal files in
// different directories with different timestamps: the digests and even the
// archives are the same. A different SOURCE_DATE_EPOCH gives another image,
// and a different kernel changes only the kernel's layer.
func TestReproducible(t *testing.T) {
	epoch := time.Unix(0, 0)
	first := buildTinyGuest(t, testBuilder(t, "kernel", "initramfs", time.Now(), epoch))
	second := buildTinyGuest(t, testBuilder(t, "kernel", "initramfs", time.Unix(1234567890, 0), epoch))
	if first.digest != second.digest {
		t.Errorf("equal inputs gave digests %s and %s", first.digest, second.digest)
	}
	if !bytes.Equal(first.archive, second.archive) {
		t.Error("equal inputs gave different archives")
	}

	later := buildTinyGuest(t, testBuilder(t, "kernel", "initramfs", time.Now(), time.Unix(1700000000, 0)))
	if later.digest == first.digest {
		t.Error("another SOURCE_DATE_EPOCH gave the same digest")
	}

	newKernel := buildTinyGuest(t, testBuilder(t, "kernel 2", "initramfs", time.Now(), epoch))
	if newKernel.digest == first.digest || newKernel.top == first.top {
		t.Error("another kernel gave the same image")
	}
	if newKernel.base != first.base {
		t.Errorf("another kernel changed the base layer: %s, was %s", newKernel.base, first.base)
	}
}

// TestArchive reads an archive back the way Docker (manifest.json) and OCI
// tools and containerd (index.json) do.
func TestArchive(t *testing.T) {
	b := testBuilder(t, "kernel", "initramfs", time.Now(), time.Unix(0, 0))
	img, err := b.buildImage(context.Background(), spec(t, b, "tiny-guest"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	wantID, _ := img.ConfigName()
	archive := filepath.Join(b.opts.out, "tiny-guest.tar")

	for _, ref := range []string{"vmkit/tiny-guest:devel", "vmkit/tiny-guest:latest"} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		docker, err := tarball.ImageFromPath(archive, &tag)
		if err != nil {
			t.Fatalf("manifest.json: %s: %v", ref, err)
		}
		if id, _ := docker.ConfigName(); id != wantID {
			t.Errorf("manifest.json: %s has config %s, want %s", ref, id, wantID)
		}
	}

	dir := t.TempDir()
	untar(t, archive, dir)
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range im.Manifests {
		if m.Digest != want {
			t.Errorf("index.json names %s, want %s", m.Digest, want)
		}
		names = append(names, m.Annotations[annotationImageName]+" "+m.Annotations[annotationRefName])
	}
	wantNames := []string{"docker.io/vmkit/tiny-guest:devel devel", "docker.io/vmkit/tiny-guest:latest latest"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("index.json names (-want +got):\n%s", diff)
	}
	oci, err := index.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("config: os %s, architecture %s, created %s; want linux, amd64, 1970", cf.OS, cf.Architecture, cf.Created)
	}
	if diff := cmp.Diff([]string{defaultPath}, cf.Config.Env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	// Every layer blob is where index.json and manifest.json say and has
	// the content its digests claim.
	layers, err := oci.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		d, _ := l.Digest()
		blob, err := os.ReadFile(filepath.Join(dir, blobPath(d)))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(blob); hex.EncodeToString(got[:]) != d.Hex {
			t.Errorf("blob %s has digest %x", d, got)
		}
	}
}

func TestComponentImageConfig(t *testing.T) {
	b := testBuilder(t, "k", "i", time.Now(), time.Unix(0, 0))
	for _, tc := range []struct {
		name, user string
		entrypoint []string
		env        string
	}{
		{"pause", "65535:65535", []string{"/pause"}, defaultPath},
		{"virt-operator", "1001", []string{"/usr/bin/virt-operator"}, defaultPath},
		{"virt-controller", "1001", []string{"/usr/bin/virt-controller"}, defaultPath},
		{"virt-api", "1001", []string{"/usr/bin/virt-api"}, defaultPath},
		{"virt-handler", "0", []string{"/usr/bin/virt-handler"}, defaultPath},
		{"virt-launcher", "0", []string{"/usr/bin/virt-launcher"}, launcherPath},
	} {
		s := spec(t, b, tc.name)
		c := s.config
		if c.User != tc.user || !cmp.Equal(c.Entrypoint, tc.entrypoint) || !cmp.Equal(c.Env, []string{tc.env}) {
			t.Errorf("%s: User %q, Entrypoint %q, Env %q; want %q, %q, %q", tc.name, c.User, c.Entrypoint, c.Env, tc.user, tc.entrypoint, tc.env)
		}
	}
	if refs := spec(t, b, "pause").refs; !cmp.Equal(refs, []string{"registry.k8s.io/pause:3.10"}) {
		t.Errorf("pause refs %q", refs)
	}
	if !strings.Contains(launcherPath, ":/usr/sbin:") {
		t.Error("the launcher's PATH lacks /usr/sbin, where virt-launcher looks for libvirtd")
	}
}

// TestBinaryMustBeStatic: a dynamically linked binary is refused before
// it ends up in an image whose base has no libc.
func TestBinaryMustBeStatic(t *testing.T) {
	b := testBuilder(t, "k", "i", time.Now(), time.Unix(0, 0))
	if err := os.MkdirAll(b.opts.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := b.binaryLayer("virt-handler", "usr/bin/virt-handler"); err == nil || !strings.Contains(err.Error(), "hack/build-images.sh") {
		t.Errorf("missing binary: got error %v", err)
	}
	// /bin/sh is dynamically linked on Debian.
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.opts.bin, "virt-handler"), sh, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := b.binaryLayer("virt-handler", "usr/bin/virt-handler"); err == nil || !strings.Contains(err.Error(), "dynamically linked: link it statically") {
		t.Errorf("dynamic binary: got error %v", err)
	}
}

type tarEntry struct {
	Name, Linkname string
	Type           byte
	Mode           int64
	Size           int64
	Content        string
}

// readLayer returns a layer's entries, checking what every entry shares:
// root's ownership, the layer's time, no user or group names.
func readLayer(t *testing.T, l *layer, modTime time.Time) []tarEntry {
	t.Helper()
	f, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256.Sum256(f); hex.EncodeToString(got[:]) != l.digest.Hex || int64(len(f)) != l.size {
		t.Errorf("the blob does not match its digest or size")
	}
	zr, err := gzip.NewReader(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header has time %s, name %q", zr.ModTime, zr.Name)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256.Sum256(raw); hex.EncodeToString(got[:]) != l.diffID.Hex {
		t.Errorf("the tar does not match the diff ID")
	}
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(modTime) {
			t.Errorf("%s: uid %d gid %d uname %q gname %q time %s", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		content, _ := io.ReadAll(tr)
		out = append(out, tarEntry{Name: h.Name, Linkname: h.Linkname, Type: h.Typeflag, Mode: h.Mode, Size: h.Size, Content: string(content)})
	}
}

func TestWriteLayer(t *testing.T) {
	tr := newTree()
	tr.Symlink("lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	tr.File("usr/bin/tool", 0o4755, []byte("#!"))
	tr.Dir("tmp", 0o1777)
	tr.File("/etc//passwd", 0o644, []byte("root"))
	modTime := time.Unix(1700000000, 0).UTC()
	l, err := writeLayer(tr, t.TempDir(), layerOptions{ModTime: modTime, Level: gzip.BestCompression})
	if err != nil {
		t.Fatal(err)
	}
	want := []tarEntry{
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Size: 4, Content: "root"},
		{Name: "lib64/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "lib64/ld-linux-x86-64.so.2", Linkname: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", Type: tar.TypeSymlink, Mode: 0o777},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/tool", Type: tar.TypeReg, Mode: 0o4755, Size: 2, Content: "#!"},
	}
	if diff := cmp.Diff(want, readLayer(t, l, modTime)); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
}

func TestWriteLayerRejectsPathsBelowNonDirectories(t *testing.T) {
	tr := newTree()
	tr.Symlink("var/run", "/run")
	tr.Dir("var/run/libvirt", 0o755)
	if _, err := writeLayer(tr, t.TempDir(), layerOptions{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("got error %v, want one about var/run not being a directory", err)
	}
}

// TestAddHostDir unpacks the way dpkg-deb -x leaves packages: symlinks stay
// symlinks (absolute or relative), hard links become files, special files
// are skipped and reported, modes keep their setuid and sticky bits.
func TestAddHostDir(t *testing.T) {
	root := t.TempDir()
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"lib/x86_64-linux-gnu", "lib64", "usr/bin", "tmp"} {
		mustDo(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	mustDo(os.WriteFile(filepath.Join(root, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), []byte("ld"), 0o755))
	mustDo(os.Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "lib64/ld-linux-x86-64.so.2")))
	mustDo(os.WriteFile(filepath.Join(root, "usr/bin/qemu-img"), []byte("img"), 0o755))
	mustDo(os.Link(filepath.Join(root, "usr/bin/qemu-img"), filepath.Join(root, "usr/bin/qemu-img-hardlink")))
	mustDo(os.Symlink("qemu-img", filepath.Join(root, "usr/bin/qemu-img-symlink")))
	mustDo(os.Chmod(filepath.Join(root, "tmp"), 0o1777|os.ModeSticky))
	mustDo(syscall.Mkfifo(filepath.Join(root, "usr/bin/fifo"), 0o644))

	tr := newTree()
	skipped, err := tr.AddHostDir(root)
	mustDo(err)
	if diff := cmp.Diff([]string{"usr/bin/fifo"}, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	l, err := writeLayer(tr, t.TempDir(), layerOptions{ModTime: time.Unix(0, 0), Level: gzip.DefaultCompression})
	mustDo(err)
	want := []tarEntry{
		{Name: "lib/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "lib/x86_64-linux-gnu/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", Type: tar.TypeReg, Mode: 0o755, Size: 2, Content: "ld"},
		{Name: "lib64/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "lib64/ld-linux-x86-64.so.2", Linkname: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", Type: tar.TypeSymlink, Mode: 0o777},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/qemu-img", Type: tar.TypeReg, Mode: 0o755, Size: 3, Content: "img"},
		{Name: "usr/bin/qemu-img-hardlink", Type: tar.TypeReg, Mode: 0o755, Size: 3, Content: "img"},
		{Name: "usr/bin/qemu-img-symlink", Linkname: "qemu-img", Type: tar.TypeSymlink, Mode: 0o777},
	}
	if diff := cmp.Diff(want, readLayer(t, l, time.Unix(0, 0))); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
}

// TestExtract flattens two layers: the upper one's symlink hides the lower
// one's directory of the same name, and its files replace the lower ones.
func TestExtract(t *testing.T) {
	lower, upper := newTree(), newTree()
	lower.File("var/run/old", 0o644, []byte("hidden"))
	lower.File("etc/motd", 0o644, []byte("lower"))
	lower.File("usr/bin/tool", 0o755, []byte("tool"))
	upper.Symlink("var/run", "/run")
	upper.File("etc/motd", 0o600, []byte("upper"))
	upper.Dir("tmp", 0o1777)
	dir := t.TempDir()
	opts := layerOptions{ModTime: time.Unix(0, 0), Level: gzip.DefaultCompression}
	var layers []*layer
	for _, tr := range []*tree{lower, upper} {
		l, err := writeLayer(tr, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := assemble(layers, v1.Config{}, time.Unix(0, 0), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := extract(img, root); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(root, "var/run")); err != nil || target != "/run" {
		t.Errorf("var/run: %q, %v; want a symlink to /run", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/motd")); err != nil || string(b) != "upper" {
		t.Errorf("etc/motd: %q, %v; want the upper layer's", b, err)
	}
	for p, mode := range map[string]os.FileMode{"etc/motd": 0o600, "usr/bin/tool": 0o755, "tmp": 0o777 | os.ModeSticky | os.ModeDir} {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %s, want %s", p, fi.Mode(), mode)
		}
	}
}

// untar unpacks the regular files and directories of a tar file.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(cleanPath(h.Name)))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		default:
			t.Fatalf("%s: unexpected type %q in an image archive", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRemoveRootfs(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.MkdirAll(filepath.Join(other, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeRootfs(other); err == nil {
		t.Error("removed a directory that is no launcher file system")
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "usr/bin/virt-launcher"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{rootfs, filepath.Join(dir, "missing")} {
		if err := removeRootfs(d); err != nil {
			t.Errorf("removeRootfs(%s): %v", d, err)
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists", d)
		}
	}
}
