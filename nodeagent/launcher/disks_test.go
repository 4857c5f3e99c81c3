package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

const diskUID = "0d4a0f4e-1111-4222-8333-944455556666"

// diskLauncher is a launcher whose container disk directory holds files.
func diskLauncher(t *testing.T, files ...string) *Launcher {
	t.Helper()
	dir := t.TempDir()
	cd := filepath.Join(dir, "cd")
	for _, f := range files {
		p := filepath.Join(cd, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := New(Config{Name: "vm1", Namespace: "ns", UID: diskUID, ShareDir: filepath.Join(dir, "share"), ContainerDiskDir: cd, Hypervisor: hypervisor.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The layouts a container-disk sidecar serves: cmd/container-disk copies
// the image's /disk and /boot into <dir>/<uid>/<served name>/.
func TestServedImage(t *testing.T) {
	u := diskUID + "/"
	for _, tc := range []struct {
		name  string
		files []string
		disk  string // served name
		path  string // containerDisk.path
		want  string // under the container disk directory; "" for an error
	}{
		{name: "container-disk copy", files: []string{u + "disk_0/disk/fedora.qcow2"}, disk: "disk_0", want: u + "disk_0/disk/fedora.qcow2"},
		{name: "image with a kernel too", files: []string{u + "disk_0/boot/vmlinux", u + "disk_0/disk/fedora.qcow2"}, disk: "disk_0", want: u + "disk_0/disk/fedora.qcow2"},
		{name: "containerDisk.path", files: []string{u + "disk_0/disk/a.img", u + "disk_0/disk/b.img"}, disk: "disk_0", path: "/disk/b.img", want: u + "disk_0/disk/b.img"},
		{name: "file", files: []string{u + "disk_2.img"}, disk: "disk_2", want: u + "disk_2.img"},
		{name: "file without the UID", files: []string{"disk_0.qcow2"}, disk: "disk_0", want: "disk_0.qcow2"},
		{name: "another volume's image", files: []string{u + "disk_10/disk/ten.img"}, disk: "disk_1"},
		{name: "copy in progress", files: []string{u + ".disk_0.tmp-123/disk/partial.img"}, disk: "disk_0"},
		{name: "socket", files: []string{u + "disk_0.sock"}, disk: "disk_0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := diskLauncher(t, tc.files...)
			got, err := l.servedImage(tc.disk, diskUID, tc.path)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "no container disk image served as "+tc.disk) {
					t.Errorf("servedImage = %s, %v; want an error naming %s", got, err, tc.disk)
				}
				return
			}
			if want := filepath.Join(l.cfg.ContainerDiskDir, tc.want); got != want || err != nil {
				t.Errorf("servedImage = %s, %v; want %s", got, err, want)
			}
		})
	}
}

func TestKernelBootFile(t *testing.T) {
	u := diskUID + "/"
	l := diskLauncher(t, u+"kernel-boot/boot/vmlinux", u+"kernel-boot/boot/initramfs-idle.cpio.gz", u+"kernel-boot/other/vmlinuz")
	for path, want := range map[string]string{
		"/boot/vmlinux":                u + "kernel-boot/boot/vmlinux",
		"/boot/initramfs-idle.cpio.gz": u + "kernel-boot/boot/initramfs-idle.cpio.gz",
		"/other/vmlinuz":               u + "kernel-boot/other/vmlinuz",
		"/boot/missing":                "",
	} {
		got, err := l.kernelBootFile(diskUID, path)
		switch {
		case want == "" && (err == nil || !strings.Contains(err.Error(), path)):
			t.Errorf("kernelBootFile(%s) = %s, %v; want an error naming it", path, got, err)
		case want != "" && (err != nil || got != filepath.Join(l.cfg.ContainerDiskDir, want)):
			t.Errorf("kernelBootFile(%s) = %s, %v; want %s", path, got, err, want)
		}
	}
}
