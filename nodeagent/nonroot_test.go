package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// owner is the owner of path, not following a final symbolic link.
func owner(t *testing.T, path string) [2]int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return [2]int{int(st.Uid), int(st.Gid)}
}

// TestPrepareNonRootLauncher builds a launcher's root file system in a
// temporary directory (devices as the container runtime leaves them, owned
// by root, a Block claim's device node, a Filesystem claim's directory, a
// host disk image and a host disk to be created) and checks that a
// non-root launcher's user gets exactly what QEMU opens, and that nothing
// outside the root or behind a symbolic link changes owner.
func TestPrepareNonRootLauncher(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates device nodes and changes owners: run it as root")
	}
	const uid, gid = 4107, 4108
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside") // what an escape would reach
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Character devices of /dev/null's numbers stand in for kvm and tun
	// (chowning these inodes changes nothing of the host's devices).
	mknod := func(p string, mode uint32, major, minor uint32) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mknod(p, mode, int(unix.Mkdev(major, minor))); err != nil {
			t.Fatal(err)
		}
	}
	mknod(filepath.Join(root, "dev/net/tun"), unix.S_IFCHR|0o600, 1, 3)
	mknod(filepath.Join(root, "dev/kvm"), unix.S_IFCHR|0o600, 1, 3)
	mk(outside)
	// The Block claim's device (a node of /dev/loop0's numbers: chowning
	// this inode changes nothing of the host's /dev/loop0).
	mknod(filepath.Join(root, "dev/blk"), unix.S_IFBLK|0o660, 7, 0)
	// A Filesystem claim: no /dev/<volume>, its disk.img is the pod's fsGroup's business.
	mk(filepath.Join(root, hostDisksDir, "fs/disk.img"))
	// Host disks: one image, one to be created, one whose name is a link out.
	mk(filepath.Join(root, hostDisksDir, "hd/img.raw"))
	if err := os.MkdirAll(filepath.Join(root, hostDisksDir, "hdnew"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, hostDisksDir, "hdlink"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, hostDisksDir, "hdlink/img.raw")); err != nil {
		t.Fatal(err)
	}
	// A device path that is a link out of the root.
	if err := os.Symlink(outside, filepath.Join(root, "dev/vhost-net")); err != nil {
		t.Fatal(err)
	}

	vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
		{Name: "blk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}},
		{Name: "fs", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}},
		{Name: "hd", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/var/images/img.raw", Type: v1.HostDiskExists}}},
		{Name: "hdnew", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/var/images/new.raw", Type: v1.HostDiskExistsOrCreateEmpty,
			Capacity: resource.MustParse("1Mi")}}},
		{Name: "cd", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "x"}}},
	}}}

	// A root launcher needs nothing.
	if err := prepareNonRootLauncher(vmi, root, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := owner(t, filepath.Join(root, "dev/net/tun")); got != [2]int{0, 0} {
		t.Fatalf("root launcher: /dev/net/tun owned by %v", got)
	}

	// A device behind a link is refused, naming it.
	err := prepareNonRootLauncher(vmi, root, uid, gid)
	if err == nil {
		t.Fatal("a /dev/vhost-net that links out of the launcher's root was followed or ignored")
	}
	t.Logf("a link out of the root: %v", err)
	if err := os.Remove(filepath.Join(root, "dev/vhost-net")); err != nil {
		t.Fatal(err)
	}
	if err := prepareNonRootLauncher(vmi, root, uid, gid); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{
		"dev/net/tun":                 {uid, gid},
		"dev/kvm":                     {uid, gid},
		"dev/blk":                     {uid, gid},
		hostDisksDir + "/fs/disk.img": {0, 0},
		hostDisksDir + "/hd/img.raw":  {uid, gid},
		hostDisksDir + "/hd":          {0, 0},
		// #35, N8: the directory of a DiskOrCreate image keeps its owner
		// (it is the node's: /etc for a path of /etc/x.img); the agent
		// creates the image itself, owned by the launcher's user.
		hostDisksDir + "/hdnew":         {0, 0},
		hostDisksDir + "/hdnew/new.raw": {uid, gid},
	}
	for p, w := range want {
		if got := owner(t, filepath.Join(root, p)); got != w {
			t.Errorf("/%s owned by %v, want %v", p, got, w)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, hostDisksDir, "hdnew/new.raw")); err != nil || !fi.Mode().IsRegular() || fi.Size() != 1<<20 || fi.Mode().Perm() != 0o660 {
		t.Errorf("the created image: %v %v, want a regular file of 1Mi bytes, mode 0660", fi, err)
	}
	// A second start keeps the image as it is (the guest's data).
	if err := os.WriteFile(filepath.Join(root, hostDisksDir, "hdnew/new.raw"), []byte("data"), 0o660); err != nil {
		t.Fatal(err)
	}
	if err := prepareNonRootLauncher(vmi, root, uid, gid); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, hostDisksDir, "hdnew/new.raw")); err != nil || string(b) != "data" {
		t.Errorf("the image after a second start: %q %v, want it kept", b, err)
	}
	if got := owner(t, outside); got != [2]int{0, 0} {
		t.Errorf("a file outside the launcher's root changed owner: %v", got)
	}

	// A host disk image that links out is refused, the link's target untouched.
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "hdlink", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/x/img.raw", Type: v1.HostDiskExists}}})
	if err := prepareNonRootLauncher(vmi, root, uid, gid); err == nil {
		t.Error("a host disk image that links out of the launcher's root was followed or ignored")
	} else {
		t.Logf("a host disk link: %v", err)
	}
	if got := owner(t, outside); got != [2]int{0, 0} {
		t.Errorf("a file outside the launcher's root changed owner: %v", got)
	}
}

// TestPrepareHostDiskHardLink (#35, N8): a host disk image that is a hard
// link (the VMI's creator can make one in a directory the launcher may
// write, to any file of the node's file system) is refused, and neither of
// its names changes owner.
func TestPrepareHostDiskHardLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test changes owners: run it as root")
	}
	const uid, gid = 4107, 4108
	root := t.TempDir()
	dir := filepath.Join(root, hostDisksDir, "hd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(root, "shadow") // what the link is another name of
	if err := os.WriteFile(victim, []byte("root:x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, filepath.Join(dir, "img.raw")); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []v1.HostDiskType{v1.HostDiskExists, v1.HostDiskExistsOrCreateEmpty} {
		vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
			{Name: "hd", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data/img.raw", Type: typ, Capacity: resource.MustParse("1Mi")}}},
		}}}
		err := prepareNonRootLauncher(vmi, root, uid, gid)
		if err == nil || !strings.Contains(err.Error(), "hard links") {
			t.Errorf("%s: a hard-linked image: error %v, want one about its hard links", typ, err)
		}
		if got := owner(t, victim); got != [2]int{0, 0} {
			t.Errorf("%s: the link's other name is owned by %v", typ, got)
		}
	}
}
