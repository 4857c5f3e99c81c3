package sidecar_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/containerdisk/sidecar"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns the regular files under dir by relative path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// noLink fails as a hard link across filesystems does, so files are copied.
func noLink(oldname, newname string) error {
	return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EXDEV}
}

func TestServe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // in the image's root
		want  map[string]string // under the copy path
	}{{
		name:  "disk",
		files: map[string]string{"disk/fedora.qcow2": "QFI\xfbimage", "etc/os-release": "not served"},
		want:  map[string]string{"disk/fedora.qcow2": "QFI\xfbimage"},
	}, {
		name:  "kernel boot",
		files: map[string]string{"boot/vmlinux": "kernel", "boot/initramfs-idle.cpio.gz": "initrd", "boot/efi/grub.cfg": "cfg"},
		want:  map[string]string{"boot/vmlinux": "kernel", "boot/initramfs-idle.cpio.gz": "initrd", "boot/efi/grub.cfg": "cfg"},
	}, {
		name:  "disk and kernel",
		files: map[string]string{"disk/disk.img": "raw", "boot/vmlinux": "kernel"},
		want:  map[string]string{"disk/disk.img": "raw", "boot/vmlinux": "kernel"},
	}} {
		for _, linked := range []bool{true, false} {
			name := tc.name + map[bool]string{true: ", hard links", false: ", copies"}[linked]
			t.Run(name, func(t *testing.T) {
				root, cd := t.TempDir(), t.TempDir()
				writeFiles(t, root, tc.files)
				dst := filepath.Join(cd, "uid", "disk_0")
				link := os.Link
				if !linked {
					link = noLink
				}
				if err := sidecar.Serve(root, dst, sidecar.Options{Link: link}); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, readTree(t, dst)); diff != "" {
					t.Errorf("served files (-want +got):\n%s", diff)
				}
				for rel := range tc.want {
					src, err := os.Stat(filepath.Join(root, rel))
					if err != nil {
						t.Fatal(err)
					}
					got, err := os.Stat(filepath.Join(dst, rel))
					if err != nil {
						t.Fatal(err)
					}
					if os.SameFile(src, got) != linked {
						t.Errorf("%s: hard link %v, want %v", rel, !linked, linked)
					}
					if got.Mode() != src.Mode() {
						t.Errorf("%s: mode %v, want %v", rel, got.Mode(), src.Mode())
					}
				}
				if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("copy path: %v %v, want a directory readable by the launcher (0755)", fi.Mode(), err)
				}
			})
		}
	}
}

func TestServeFollowsSymlinks(t *testing.T) {
	root, cd := t.TempDir(), t.TempDir()
	writeFiles(t, root, map[string]string{"images/fedora.qcow2": "image", "kernels/vmlinux-6.1": "kernel"})
	if err := os.Mkdir(filepath.Join(root, "disk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../images/fedora.qcow2", filepath.Join(root, "disk", "disk.qcow2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "kernels"), filepath.Join(root, "boot")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(cd, "kernel-boot")
	if err := sidecar.Serve(root, dst, sidecar.Options{Link: noLink}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"disk/disk.qcow2": "image", "boot/vmlinux-6.1": "kernel"}
	if diff := cmp.Diff(want, readTree(t, dst)); diff != "" {
		t.Errorf("served files (-want +got):\n%s", diff)
	}
}

// The launcher looks for disk_0 and disk_0.<ext> (nodeagent/launcher's
// servedImage): it must never see a copy before it is complete.
func TestServeIsAtomic(t *testing.T) {
	root, cd := t.TempDir(), t.TempDir()
	writeFiles(t, root, map[string]string{"disk/a.img": "a", "disk/b.img": "b"})
	// A partial copy left by an earlier run stopped while copying.
	writeFiles(t, cd, map[string]string{".disk_0.tmp-123/disk/a.img": "partial"})
	dst := filepath.Join(cd, "disk_0")
	copied := 0
	link := func(oldname, newname string) error {
		copied++
		if visible, _ := filepath.Glob(filepath.Join(cd, "disk_0*")); len(visible) != 0 {
			t.Errorf("while copying %s, the launcher sees %v", oldname, visible)
		}
		if rel, _ := filepath.Rel(cd, newname); !strings.HasPrefix(rel, ".disk_0.tmp-") {
			t.Errorf("copying to %s, not into a hidden sibling of %s", newname, dst)
		}
		return noLink(oldname, newname)
	}
	if err := sidecar.Serve(root, dst, sidecar.Options{Link: link}); err != nil {
		t.Fatal(err)
	}
	if copied != 2 {
		t.Errorf("copied %d files, want 2", copied)
	}
	entries, err := os.ReadDir(cd)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"disk_0"}, names); diff != "" {
		t.Errorf("copy path's directory (-want +got), temporary copies left:\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"disk/a.img": "a", "disk/b.img": "b"}, readTree(t, dst)); diff != "" {
		t.Errorf("served files (-want +got):\n%s", diff)
	}
}

// The pod's volume outlives the container: a restarted sidecar keeps what
// an earlier run served (the launcher's domain may use it).
func TestServeKeepsServedCopy(t *testing.T) {
	root, cd := t.TempDir(), t.TempDir()
	writeFiles(t, root, map[string]string{"disk/disk.img": "new"})
	writeFiles(t, cd, map[string]string{"disk_0/disk/disk.img": "served before"})
	if err := sidecar.Serve(root, filepath.Join(cd, "disk_0"), sidecar.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, filepath.Join(cd, "disk_0")); got["disk/disk.img"] != "served before" {
		t.Errorf("served copy replaced: %v", got)
	}
}

func TestServeSparse(t *testing.T) {
	root, cd := t.TempDir(), t.TempDir()
	const size, at = 64 << 20, 1 << 20
	writeFiles(t, root, map[string]string{"disk/disk.img": ""})
	f, err := os.OpenFile(filepath.Join(root, "disk", "disk.img"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data"), at); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dst := filepath.Join(cd, "disk_0")
	if err := sidecar.Serve(root, dst, sidecar.Options{Link: noLink}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dst, "disk", "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	copy(want[at:], "data")
	if !bytes.Equal(b, want) {
		t.Fatalf("copy differs from the image (%d bytes, want %d)", len(b), size)
	}
	// Where the filesystem keeps the image's holes, the copy keeps them too.
	blocks := func(p string) int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	if src, got := blocks(filepath.Join(root, "disk", "disk.img")), blocks(filepath.Join(dst, "disk", "disk.img")); src < size/2 && got >= size/2 {
		t.Errorf("copy uses %d bytes on disk, the sparse image %d", got, src)
	}
}

func TestServeErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		dirs  []string
		want  []string // in the error
	}{{
		name: "nothing to serve",
		want: []string{"nothing to serve", "/disk", "/boot"},
	}, {
		name: "empty disk directory",
		dirs: []string{"disk"},
		want: []string{"nothing to serve: no file under", "/disk"},
	}, {
		name:  "disk is a file",
		files: map[string]string{"disk": "image"},
		want:  []string{"/disk is not a directory"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root, cd := t.TempDir(), t.TempDir()
			writeFiles(t, root, tc.files)
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			err := sidecar.Serve(root, filepath.Join(cd, "disk_0"), sidecar.Options{})
			if err == nil {
				t.Fatal("served nothing without an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if left, _ := os.ReadDir(cd); len(left) != 0 {
				t.Errorf("left %v behind", left)
			}
		})
	}
}

func TestWaitRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk_0")
	writeFiles(t, path, map[string]string{"disk/disk.img": "image"})
	removed := make(chan bool, 1)
	go func() { removed <- sidecar.WaitRemoved(t.Context(), path, 10*time.Millisecond) }()
	select {
	case r := <-removed:
		t.Fatalf("returned %v while the copy is there", r)
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-removed:
		if !r {
			t.Error("returned false once the copy was removed, want true")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5 s after the copy was removed")
	}

	// Stopped first: false.
	writeFiles(t, path, map[string]string{"disk/disk.img": "image"})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if sidecar.WaitRemoved(ctx, path, 10*time.Millisecond) {
		t.Error("returned true with the copy still there")
	}
}
