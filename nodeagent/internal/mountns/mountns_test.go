package mountns

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBindIntoAnotherNamespace: a directory and a file of the test's mount
// namespace are mounted into a child's own mount namespace, where the
// child sees them and the test's namespace gains no mount; Unmount takes
// them away again.
func TestBindIntoAnotherNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) to enter mount namespaces")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is not installed: apt-get install util-linux: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "claim")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "disk.img"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "device")
	if err := os.WriteFile(file, []byte("block"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "hotplug")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	// A child in a mount namespace of its own (private propagation, so
	// nothing it mounts reaches the test's), as a launcher container is.
	// It says so once unshare has made its mounts private, which unshare
	// does after it entered the namespace: a mount made in between would
	// propagate back to the test's.
	child := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", "echo ready; exec sleep 60")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	ready := make(chan string, 1)
	go func() {
		b := make([]byte, 6)
		n, _ := io.ReadFull(out, b)
		ready <- string(b[:n])
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("the child said %q, want ready", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the child did not enter a mount namespace of its own within 5 s")
	}
	pid := child.Process.Pid
	if a, b := readlink(t, Path(pid)), readlink(t, Path(os.Getpid())); a == b {
		t.Fatalf("the child's mount namespace %s is the test's", a)
	}
	self := Path(os.Getpid())
	dst := filepath.Join(target, "data")
	if err := Bind(self, src, Path(pid), dst); err != nil {
		t.Fatalf("Bind directory: %v", err)
	}
	fdst := filepath.Join(target, "blk")
	if err := Bind(self, file, Path(pid), fdst); err != nil {
		t.Fatalf("Bind file: %v", err)
	}
	if err := Bind(self, src, Path(pid), dst); err == nil {
		t.Error("a second Bind over the same mount point succeeded")
	}
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	if b, err := os.ReadFile(root + filepath.Join(dst, "disk.img")); err != nil || string(b) != "data" {
		t.Errorf("the child reads %q, %v through the mount; want data", b, err)
	}
	if b, err := os.ReadFile(root + fdst); err != nil || string(b) != "block" {
		t.Errorf("the child reads %q, %v through the file mount; want block", b, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "disk.img")); err == nil {
		t.Error("the mount reached the test's own mount namespace")
	}
	points, err := MountPoints(pid, target)
	slices.Sort(points)
	if err != nil || !slices.Equal(points, []string{"blk", "data"}) {
		t.Errorf("MountPoints: %v, %v; want [blk data]", points, err)
	}
	for _, d := range []string{dst, fdst} {
		if err := Unmount(Path(pid), d); err != nil {
			t.Errorf("Unmount %s: %v", d, err)
		}
	}
	if points, err := MountPoints(pid, target); err != nil || len(points) != 0 {
		t.Errorf("MountPoints after Unmount: %v, %v", points, err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("the mount point %s is left: %v", dst, err)
	}
	if err := Unmount(Path(pid), dst); err != nil {
		t.Errorf("Unmount of what is gone: %v", err)
	}

	// A block device of the test's namespace becomes a node of the
	// child's, owned by the given user.
	blk := firstBlockDevice(t)
	ddst := filepath.Join(target, "disk")
	rdev, err := Device(self, blk, Path(pid), ddst, 107, 107)
	if err != nil {
		t.Fatalf("Device %s: %v", blk, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(root+ddst, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != rdev || st.Uid != 107 {
		t.Errorf("the child's %s: %+v, %v; want block device %d owned by 107", ddst, st, err, rdev)
	}
	if _, err := Device(self, blk, Path(pid), ddst, 107, 107); err != nil {
		t.Errorf("Device again over the same node: %v", err)
	}
	if _, err := Device(self, filepath.Join(src, "disk.img"), Path(pid), filepath.Join(target, "nope"), 0, 0); err == nil {
		t.Error("Device of a regular file succeeded")
	}
	if devs, err := Devices(Path(pid), target); err != nil || !slices.Equal(devs, []string{"disk"}) {
		t.Errorf("Devices: %v, %v; want [disk]", devs, err)
	}
	if got, err := Remove(Path(pid), ddst); err != nil || got != rdev {
		t.Errorf("Remove: %d, %v; want the device %d", got, err, rdev)
	}
	if devs, err := Devices(Path(pid), target); err != nil || len(devs) != 0 {
		t.Errorf("Devices after Remove: %v, %v", devs, err)
	}
}

// firstBlockDevice is a block device node of /dev.
func firstBlockDevice(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			return filepath.Join("/dev", e.Name())
		}
	}
	t.Fatal("no block device in /dev")
	return ""
}

// TestOutside: a process started in a mount namespace of its own (the test
// binary again, under unshare, as a node agent in a container is) finds
// its parent's, the test's.
func TestOutside(t *testing.T) {
	ns, err := Outside()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.Readlink(ns)
	if ns == "" || got == "" {
		t.Fatalf("Outside: %q (%q)", ns, got)
	}
	own, _ := os.Readlink(Path(os.Getpid()))
	if os.Getenv("MOUNTNS_OUTSIDE_CHILD") == "1" {
		fmt.Printf("outside=%s own=%s\n", got, own)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is not installed: apt-get install util-linux: %v", err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestOutside$")
	cmd.Env = append(os.Environ(), "MOUNTNS_OUTSIDE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	want := fmt.Sprintf("outside=%s own=", own)
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "own="+own+"\n") {
		t.Errorf("the child in a namespace of its own reports %q; want its parent's namespace %s outside and another of its own", out, own)
	}
}

// readlink is os.Readlink of path, failing the test on an error.
func readlink(t *testing.T, path string) string {
	t.Helper()
	s, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
