package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMain runs the command itself when a test re-executes the test binary
// with containerDiskMainEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(containerDiskMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

const containerDiskMainEnv = "VMKIT_CONTAINER_DISK_MAIN"

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
				if err := serve(root, dst, link); err != nil {
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
	if err := serve(root, dst, noLink); err != nil {
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
	if err := serve(root, dst, link); err != nil {
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
	if err := serve(root, filepath.Join(cd, "disk_0"), os.Link); err != nil {
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
	if err := serve(root, dst, noLink); err != nil {
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
			err := serve(root, filepath.Join(cd, "disk_0"), os.Link)
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

func TestRun(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"disk/disk.img": "image"})
	never := context.Background()
	// Long enough to serve a small file, the time a test waits.
	soon, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		args   []string
		code   int
		stderr string
		served bool
	}{
		{name: "no-op", ctx: never, args: []string{"--no-op"}, code: 0},
		{name: "no-op ignores copy path", ctx: never, args: []string{"--no-op", "--copy-path", "P"}, code: 0},
		{name: "no flags", ctx: never, code: 2, stderr: "--copy-path or --no-op is required"},
		{name: "unknown flag", ctx: never, args: []string{"-c", "P"}, code: 2, stderr: "flag provided but not defined: -c"},
		{name: "argument", ctx: never, args: []string{"--copy-path", "P", "extra"}, code: 2, stderr: `unexpected arguments ["extra"]`},
		{name: "missing source", ctx: never, args: []string{"--copy-path", "P", "--root", "EMPTY"}, code: 1, stderr: "neither EMPTY/disk nor EMPTY/boot exists"},
		{name: "serves until stopped", ctx: soon, args: []string{"--copy-path", "P", "--root", root}, code: 0, served: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, a := range tc.args {
				switch a {
				case "P":
					tc.args[i] = filepath.Join(dir, "disk_0")
				case "EMPTY":
					tc.args[i] = t.TempDir()
					tc.stderr = strings.ReplaceAll(tc.stderr, "EMPTY", tc.args[i])
				}
			}
			var stderr bytes.Buffer
			if code := run(tc.ctx, tc.args, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, &stderr)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not say %q", &stderr, tc.stderr)
			}
			_, err := os.Stat(filepath.Join(dir, "disk_0", "disk", "disk.img"))
			if served := err == nil; served != tc.served {
				t.Errorf("served: %v, want %v", served, tc.served)
			}
		})
	}
}

// serving starts the command serving files (path: content) of a new root
// at a copy path named name, and waits until the file at want is served.
// It returns the copy path, the command, its exit and its stderr.
func serving(t *testing.T, files map[string]string, name, want string) (string, *exec.Cmd, <-chan error, *bytes.Buffer) {
	t.Helper()
	root, cd := t.TempDir(), t.TempDir()
	writeFiles(t, root, files)
	dst := filepath.Join(cd, name)
	cmd := exec.Command(os.Args[0], "--copy-path", dst, "--root", root)
	cmd.Env = append(os.Environ(), containerDiskMainEnv+"=1")
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dst, want)); err == nil {
			return dst, cmd, exited, stderr
		}
		select {
		case err := <-exited:
			t.Fatalf("exited before serving: %v; stderr: %s", err, stderr)
		case <-deadline:
			t.Fatalf("nothing served at %s; stderr: %s", dst, stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The sidecar is a long-running container: it serves, stays up, and exits
// 0 on SIGTERM.
func TestRunsUntilSIGTERM(t *testing.T) {
	_, cmd, exited, stderr := serving(t, map[string]string{"disk/disk.img": "image"}, "disk_0", "disk/disk.img")
	select {
	case err := <-exited:
		t.Fatalf("exited after serving, before SIGTERM: %v; stderr: %s", err, stderr)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit on SIGTERM: %v, want 0; stderr: %s", err, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after SIGTERM")
	}
}

// Once the launcher removed the copy (its guest ended: shut down or
// migrated away), the sidecar exits 0 by itself so that the pod completes.
func TestExitsWhenCopyRemoved(t *testing.T) {
	dst, _, exited, stderr := serving(t, map[string]string{"boot/vmlinux": "kernel"}, "kernel-boot", "boot/vmlinux")
	select {
	case err := <-exited:
		t.Fatalf("exited while its copy is there: %v; stderr: %s", err, stderr)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit once the copy was removed: %v, want 0; stderr: %s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "was removed") {
			t.Errorf("stderr does not say why it exited: %s", stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after its copy was removed; stderr: %s", stderr)
	}
}
