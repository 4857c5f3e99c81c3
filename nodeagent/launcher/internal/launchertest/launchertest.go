// Package launchertest holds what the tests of the launcher and of its
// internal packages share: a volume laid out as the kubelet mounts
// configMaps and Secrets, an ISO image read back as a guest sees it, and
// access credentials with their Secrets. It is for tests only.
package launchertest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ProjectedVolume lays files out under dir as the kubelet's atomic writer
// does for configMap, secret, downwardAPI and service account token
// volumes: the data in a ..<timestamp> directory, ..data a link to it, and
// each top-level key or directory a link through ..data.
func ProjectedVolume(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	const ts = "..2025_01_01_00_00_00.123456789"
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}
	for name, data := range files {
		p := filepath.Join(dir, ts, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range top {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// ISOImage is what a guest sees of an image: its volume ID and, through
// the Rock Ridge names, its files with their contents and permissions.
type ISOImage struct {
	Label string
	Files map[string]string
	Modes map[string]fs.FileMode
}

// ReadISO reads the image at path with xorriso: the volume ID from the
// primary volume descriptor, the files by extracting them.
func ReadISO(t *testing.T, path string) ISOImage {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Fatalf("xorriso is required to read ISO images: install it with `apt-get install -y xorriso` (hack/setup-libvirt.sh)")
	}
	info, err := exec.Command("xorriso", "-indev", path, "-pvd_info").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso -indev %s -pvd_info: %v\n%s", path, err, info)
	}
	img := ISOImage{Files: map[string]string{}, Modes: map[string]fs.FileMode{}}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "Volume Id    :"); ok {
			img.Label = strings.TrimSpace(v)
		}
	}
	dir := filepath.Join(t.TempDir(), "extracted")
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", path, "-extract", "/", dir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract %s: %v\n%s", path, err, out)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		img.Files[filepath.ToSlash(rel)] = string(b)
		img.Modes[filepath.ToSlash(rel)] = fi.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}
