package diskimage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const diskUID = "0d4a0f4e-1111-4222-8333-944455556666"

// diskConfig is a disk configuration whose container disk directory holds
// files.
func diskConfig(t *testing.T, files ...string) *Config {
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
	// The launcher's defaults.
	return &Config{Key: "ns/vm1", ContainerDiskDir: cd, EphemeralDiskDir: domainxml.DefaultEphemeralDiskDir, PrivateDir: domainxml.DefaultPrivateDir, DeviceDir: "/dev"}
}

// prepare is Prepare with fresh options, as the launcher calls it.
func prepare(ctx context.Context, c *Config, vmi *v1.VirtualMachineInstance) (domainxml.Options, []string, error) {
	var opts domainxml.Options
	created, err := c.Prepare(ctx, vmi, &opts)
	return opts, created, err
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
			c := diskConfig(t, tc.files...)
			got, err := c.servedImage(tc.disk, diskUID, tc.path)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "no container disk image served as "+tc.disk) {
					t.Errorf("servedImage = %s, %v; want an error naming %s", got, err, tc.disk)
				}
				return
			}
			if want := filepath.Join(c.ContainerDiskDir, tc.want); got != want || err != nil {
				t.Errorf("servedImage = %s, %v; want %s", got, err, want)
			}
		})
	}
}

func TestKernelBootFile(t *testing.T) {
	u := diskUID + "/"
	c := diskConfig(t, u+"kernel-boot/boot/vmlinux", u+"kernel-boot/boot/initramfs-idle.cpio.gz", u+"kernel-boot/other/vmlinuz")
	for path, want := range map[string]string{
		"/boot/vmlinux":                u + "kernel-boot/boot/vmlinux",
		"/boot/initramfs-idle.cpio.gz": u + "kernel-boot/boot/initramfs-idle.cpio.gz",
		"/other/vmlinuz":               u + "kernel-boot/other/vmlinuz",
		"/boot/missing":                "",
	} {
		got, err := c.kernelBootFile(diskUID, path)
		switch {
		case want == "" && (err == nil || !strings.Contains(err.Error(), path)):
			t.Errorf("kernelBootFile(%s) = %s, %v; want an error naming it", path, got, err)
		case want != "" && (err != nil || got != filepath.Join(c.ContainerDiskDir, want)):
			t.Errorf("kernelBootFile(%s) = %s, %v; want %s", path, got, err, want)
		}
	}
}

// prepare readies a hostDisk's image in the directory the launcher pod
// mounts from the node, <PrivateDir>/vmi-disks/<volume>/, at the path
// domainxml gives QEMU.
func TestPrepareHostDisk(t *testing.T) {
	const capacity = 1 << 30
	for _, tc := range []struct {
		name     string
		hd       v1.HostDisk
		existing string // the image's content before prepare; "" for none
		noMount  bool   // the pod did not mount the directory
		wantErr  string // prefix of prepare's error
		wantSize int64
		wantData string // the image's content after prepare, when it existed
	}{{
		name:     "DiskOrCreate creates a sparse raw image of the capacity",
		hd:       v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Gi")},
		wantSize: capacity,
	}, {
		name:     "DiskOrCreate keeps an existing image as it is",
		hd:       v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Gi")},
		existing: "the guest's data",
		wantSize: int64(len("the guest's data")),
		wantData: "the guest's data",
	}, {
		name:     "Disk uses an existing image",
		hd:       v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExists},
		existing: "the guest's data",
		wantSize: int64(len("the guest's data")),
		wantData: "the guest's data",
	}, {
		name:    "Disk without its image",
		hd:      v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExists},
		wantErr: "spec.volumes[2] (host): hostDisk image ",
	}, {
		name:    "directory not mounted",
		hd:      v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Gi")},
		noMount: true,
		wantErr: `spec.volumes[2] (host): the directory of hostDisk.path "/var/lib/vm-disks/data.img" is not mounted at `,
	}, {
		name:    "DiskOrCreate without a capacity",
		hd:      v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExistsOrCreateEmpty},
		wantErr: "spec.volumes[2] (host): hostDisk.capacity 0: must be positive",
	}, {
		name:    "unknown type",
		hd:      v1.HostDisk{Path: "/var/lib/vm-disks/data.img", Type: "Block"},
		wantErr: `spec.volumes[2] (host): hostDisk.type "Block" is not Disk or DiskOrCreate`,
	}, {
		name:    "a path ending in ..",
		hd:      v1.HostDisk{Path: "/var/lib/..", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Gi")},
		wantErr: `spec.volumes[2] (host): hostDisk.path "/var/lib/.." does not end in a file name`,
	}, {
		name:    "the root",
		hd:      v1.HostDisk{Path: "/", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Gi")},
		wantErr: `spec.volumes[2] (host): hostDisk.path "/" does not end in a file name`,
	}, {
		name:    "no path",
		hd:      v1.HostDisk{Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Gi")},
		wantErr: `spec.volumes[2] (host): hostDisk.path "" does not end in a file name`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := diskConfig(t)
			c.EphemeralDiskDir, c.PrivateDir, c.QEMUImg = t.TempDir(), t.TempDir(), "none"
			mount := filepath.Join(c.PrivateDir, "vmi-disks", "host")
			img := filepath.Join(mount, "data.img")
			if !tc.noMount {
				if err := os.MkdirAll(mount, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.existing != "" {
				if err := os.WriteFile(img, []byte(tc.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			vmi := hostDiskVMI(tc.hd)
			opts, _, err := prepare(context.Background(), c, vmi)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("prepare = %v, want an error starting with %q", err, tc.wantErr)
				}
				// Nothing was created in the mounted directory, or beside it.
				for _, dir := range []string{mount, filepath.Dir(mount)} {
					entries, _ := os.ReadDir(dir)
					for _, e := range entries {
						if e.Name() != "host" {
							t.Errorf("prepare left %s in %s", e.Name(), dir)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(img)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != tc.wantSize {
				t.Errorf("image of %d bytes, want %d", fi.Size(), tc.wantSize)
			}
			if tc.wantData != "" {
				if got, _ := os.ReadFile(img); string(got) != tc.wantData {
					t.Errorf("image holds %q, want %q unchanged", got, tc.wantData)
				}
			} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 >= 1<<20 {
				t.Errorf("image of %d bytes uses %d blocks: not sparse", fi.Size(), st.Blocks)
			}
			// domainxml gives QEMU this image.
			dom, err := domainxml.Convert(vmi, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := dom.Devices.Disks[0].Source.File.File; got != img {
				t.Errorf("domain disk source %s, want the prepared image %s", got, img)
			}
		})
	}
}

// hostDiskVMI is a VMI whose third volume, host, is a host disk; the first
// two are ConfigMaps shared as file systems, which prepare leaves alone.
func hostDiskVMI(hd v1.HostDisk) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm1", "ns", types.UID(diskUID)
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "host"}}
	cm := v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}
	vmi.Spec.Volumes = []v1.Volume{
		{Name: "cm0", VolumeSource: cm},
		{Name: "cm1", VolumeSource: cm},
		{Name: "host", VolumeSource: v1.VolumeSource{HostDisk: &hd}},
	}
	return vmi
}

// A volume name that is not one path element would put the image outside
// the volume's mount.
func TestHostDiskImageVolumeName(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "a/b"} {
		vol := &v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{
			Path: "/var/lib/vm-disks/data.img", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: resource.MustParse("1Mi")}}}
		if img, err := hostDiskImage(filepath.Join(dir, "vmi-disks"), vol); err == nil || !strings.Contains(err.Error(), "cannot name a directory") {
			t.Errorf("volume name %q: %s, %v; want an error", name, img, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files created: %v", entries)
	}
}

// TestPrepareClaims: a Filesystem claim's disk is disk.img where the pod
// mounts it, a Block claim's the device the pod attaches, as podtemplate
// renders them and KubeVirt lays them out; an ephemeral claim gets an
// overlay; errors name the volume and what is missing.
func TestPrepareClaims(t *testing.T) {
	claim := func(name string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c-" + name}}}}
	}
	for _, tc := range []struct {
		name    string
		vol     v1.Volume
		setup   func(t *testing.T, mount, dev string) // the pod's mount of the volume and its device path
		want    func(mount, dev string) domainxml.DiskSource
		wantErr string
	}{{
		name: "filesystem claim",
		vol:  claim("root"),
		setup: func(t *testing.T, mount, _ string) {
			mkdirAll(t, mount)
			writeFile(t, filepath.Join(mount, "disk.img"), "disk")
		},
		want: func(mount, _ string) domainxml.DiskSource {
			return domainxml.DiskSource{Path: filepath.Join(mount, "disk.img"), Format: "raw"}
		},
	}, {
		name: "data volume",
		vol:  v1.Volume{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "dv"}}},
		setup: func(t *testing.T, mount, _ string) {
			mkdirAll(t, mount)
			writeFile(t, filepath.Join(mount, "disk.img"), "disk")
		},
		want: func(mount, _ string) domainxml.DiskSource {
			return domainxml.DiskSource{Path: filepath.Join(mount, "disk.img"), Format: "raw"}
		},
	}, {
		name:  "block claim",
		vol:   claim("root"),
		setup: func(t *testing.T, _, dev string) { mknodBlock(t, dev) },
		want: func(_, dev string) domainxml.DiskSource {
			return domainxml.DiskSource{Path: dev, Block: true, Format: "raw"}
		},
	}, {
		name:    "filesystem claim without disk.img",
		vol:     claim("root"),
		setup:   func(t *testing.T, mount, _ string) { mkdirAll(t, mount) },
		wantErr: "spec.volumes[0] (root): the claim's file system (mounted at ",
	}, {
		name:    "claim not in the pod",
		vol:     claim("root"),
		setup:   func(*testing.T, string, string) {},
		wantErr: "spec.volumes[0] (root): the claim is neither a block device at ",
	}, {
		name: "a character device",
		vol:  claim("root"),
		setup: func(t *testing.T, _, dev string) {
			if err := syscall.Mknod(dev, syscall.S_IFCHR|0o600, 1<<8|3); err != nil {
				t.Fatalf("mknod (needs root): %v", err)
			}
		},
		wantErr: "spec.volumes[0] (root): ",
	}, {
		name: "ephemeral claim",
		vol: v1.Volume{Name: "root", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden"}}}},
		setup: func(t *testing.T, mount, _ string) {
			mkdirAll(t, mount)
			writeFile(t, filepath.Join(mount, "disk.img"), "golden image")
		},
		// Without qemu-img the overlay is a copy.
		want: func(string, string) domainxml.DiskSource { return domainxml.DiskSource{Format: "raw"} },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := diskConfig(t)
			c.EphemeralDiskDir, c.PrivateDir, c.DeviceDir, c.QEMUImg = t.TempDir(), t.TempDir(), t.TempDir(), "none"
			mount := filepath.Join(c.PrivateDir, "vmi-disks", tc.vol.Name)
			dev := filepath.Join(c.DeviceDir, tc.vol.Name)
			tc.setup(t, mount, dev)
			vmi := hostDiskVMI(v1.HostDisk{})
			vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: tc.vol.Name}}
			vmi.Spec.Volumes = []v1.Volume{tc.vol}
			opts, _, err := prepare(context.Background(), c, vmi)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("prepare = %v, want an error starting with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, want := opts.Disks[tc.vol.Name], tc.want(mount, dev)
			if tc.vol.Ephemeral != nil {
				if !strings.HasPrefix(got.Path, c.EphemeralDiskDir+"/") {
					t.Fatalf("ephemeral disk %+v is not an overlay under %s", got, c.EphemeralDiskDir)
				}
				if data, _ := os.ReadFile(got.Path); string(data) != "golden image" {
					t.Errorf("overlay holds %q", data)
				}
				want.Path = got.Path
			}
			if got != want {
				t.Errorf("disk %+v, want %+v", got, want)
			}
			dom, err := domainxml.Convert(vmi, opts)
			if err != nil {
				t.Fatal(err)
			}
			src := dom.Devices.Disks[0].Source
			if want.Block {
				if src.Block == nil || src.Block.Dev != dev {
					t.Errorf("domain disk source %+v, want the block device %s", src, dev)
				}
			} else if src.File == nil || src.File.File != want.Path {
				t.Errorf("domain disk source %+v, want the file %s", src, want.Path)
			}
		})
	}
}

func mkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mknodBlock makes a block device node (loop0's numbers; it is never opened).
func mknodBlock(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFBLK|0o600, 7<<8); err != nil {
		t.Fatalf("mknod (needs root): %v", err)
	}
}
