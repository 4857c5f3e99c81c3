package hostsetup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoop attaches a file to a loop device, as a node's block volume, and
// detaches it the way a stopping node does: by its backing file's directory.
func TestLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("attaches a loop device")
	}
	if os.Geteuid() != 0 {
		t.Fatal("loop devices need root: run the tests as root (make test does)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "disk")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dev, err := AttachLoop(file)
	if err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	t.Cleanup(func() { _ = detachLoop(dev) })
	data, err := os.ReadFile(backing)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != Resolve(file) {
		t.Fatalf("%s is backed by %q, want %q", dev, got, file)
	}
	fi, err := os.Stat(dev)
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("%s is not a block device: %v %v", dev, fi, err)
	}

	// Another directory's devices stay.
	if err := DetachLoops(func(b string) bool { return Under(b, "/nonexistent") }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(backing); err != nil {
		t.Fatalf("%s was detached: %v", dev, err)
	}
	if err := DetachLoops(func(b string) bool { return Under(b, Resolve(dir)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(backing); !os.IsNotExist(err) {
		t.Fatalf("%s is still attached (%v)", dev, err)
	}
}

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true}, {"/a", "/a", true}, {"/a", "/a/", true}, {"/ab", "/a", false}, {"/b/a", "/a", false},
	} {
		if got := Under(c.path, c.dir); got != c.want {
			t.Errorf("Under(%q, %q) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}
