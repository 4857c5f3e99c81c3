package launcher

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// projectedVolume lays files out under dir as the kubelet's atomic writer
// does for configMap, secret, downwardAPI and service account token
// volumes: the data in a ..<timestamp> directory, ..data a link to it, and
// each top-level key or directory a link through ..data.
func projectedVolume(t *testing.T, dir string, files map[string]string) {
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

func ptr[T any](v T) *T { return &v }

// isoImage is what a guest sees of an image: its volume ID and, through
// the Rock Ridge names, its files with their contents and permissions.
type isoImage struct {
	Label string
	Files map[string]string
	Modes map[string]fs.FileMode
}

// readISO reads the image at path with xorriso: the volume ID from the
// primary volume descriptor, the files by extracting them.
func readISO(t *testing.T, path string) isoImage {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Fatalf("xorriso is required to read ISO images: install it with `apt-get install -y xorriso` (hack/setup-libvirt.sh)")
	}
	info, err := exec.Command("xorriso", "-indev", path, "-pvd_info").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso -indev %s -pvd_info: %v\n%s", path, err, info)
	}
	img := isoImage{Files: map[string]string{}, Modes: map[string]fs.FileMode{}}
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

// A VMI with a configMap disk gets a domain disk on an image of the mounted
// keys; a configMap volume no disk uses gets no image.
func TestLauncherConfigMapDisk(t *testing.T) {
	f := start(t)
	vmi := testVMI()
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks,
		v1.Disk{Name: "cfg", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: "sata"}}})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes,
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, VolumeLabel: "OEMDRV"}}},
		v1.Volume{Name: "unused", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}})
	files := map[string]string{"ks.cfg": "text\n", "settings.json": "{}"}
	projectedVolume(t, filepath.Join(f.cfg.PrivateDir, "config-map", "cfg"), files)

	if _, err := f.c.Sync(context.Background(), vmi); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	raw, _ := f.h.XML("ns_vm1")
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	var src string
	for _, d := range dom.Devices.Disks {
		if d.Alias != nil && d.Alias.Name == "ua-cfg" && d.Source != nil && d.Source.File != nil {
			src = d.Source.File.File
			if d.Device != "cdrom" || d.ReadOnly == nil {
				t.Errorf("disk cfg is a %s, read-only %v; want a read-only cdrom", d.Device, d.ReadOnly != nil)
			}
		}
	}
	if want := filepath.Join(f.cfg.PrivateDir, "config-map-disks", "cfg.iso"); src != want {
		t.Fatalf("disk cfg's source %q, want %q:\n%s", src, want, raw)
	}
	img := readISO(t, src)
	if img.Label != "OEMDRV" {
		t.Errorf("label %q, want OEMDRV", img.Label)
	}
	if diff := cmp.Diff(files, img.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(f.cfg.PrivateDir, "config-map-disks", "unused.iso")); err == nil {
		t.Error("an image was built for a volume no disk uses")
	}
}

// prepare's errors name the volume; Sync's name the VMI too.
func TestLauncherConfigDiskErrors(t *testing.T) {
	f := start(t)
	vmi := testVMI()
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "cfg"})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}})
	_, err := f.c.Sync(context.Background(), vmi)
	want := "preparing VMI ns/vm1: spec.volumes[3] (cfg): secret \"creds\" not mounted at " + filepath.Join(f.cfg.PrivateDir, "secret", "cfg")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Sync = %v, want an error containing %q", err, want)
	}
}
