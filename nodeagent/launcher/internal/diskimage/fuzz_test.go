package diskimage

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDiskPaths: whatever a VMI names as a container disk's path or a
// kernel-boot file (absolute, relative, "..", NUL, long), the launcher
// hands QEMU only files under its container disk directory, never the
// file planted next to it.
func FuzzDiskPaths(f *testing.F) {
	for _, s := range []string{"/boot/vmlinux", "vmlinux", "disk.img", "../outside/secret", "/../../outside/secret",
		"../../../../../../etc/passwd", "..", "/", "", "a/../../outside/secret", "./../outside/secret", "\x00", "disk/../../../outside/secret"} {
		f.Add(s)
	}
	dir := f.TempDir()
	cd := filepath.Join(dir, "cd")
	const uid = "u1"
	outside := filepath.Join(dir, "outside", "secret")
	for _, p := range []string{outside, filepath.Join(cd, uid, "kernel-boot", "boot", "vmlinux"), filepath.Join(cd, uid, "disk_0", "disk", "disk.img")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	c := Config{ContainerDiskDir: cd}
	inside := func(p string) bool {
		rel, err := filepath.Rel(cd, p)
		return err == nil && filepath.IsLocal(rel)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if p, err := c.kernelBootFile(uid, path); err == nil && !inside(p) {
			t.Errorf("kernelBootFile(%q) = %s, outside %s", path, p, cd)
		}
		if p, err := c.servedImage("disk_0", uid, path); err == nil && !inside(p) {
			t.Errorf("servedImage(disk_0, %q) = %s, outside %s", path, p, cd)
		}
	})
}
