package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/launchertest"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

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
	launchertest.ProjectedVolume(t, filepath.Join(f.cfg.PrivateDir, "config-map", "cfg"), files)

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
	img := launchertest.ReadISO(t, src)
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
