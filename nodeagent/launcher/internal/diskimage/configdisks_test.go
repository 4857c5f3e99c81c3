package diskimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/launchertest"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func ptr[T any](v T) *T { return &v }

func TestConfigDisks(t *testing.T) {
	saFiles := map[string]string{"token": "eyJhbGciOi.x.y", "namespace": "ns", "ca.crt": "-----BEGIN CERTIFICATE-----\n"}
	for _, tc := range []struct {
		name    string
		src     v1.VolumeSource
		mounted map[string]string // under the volume's source; nil: not mounted
		plain   bool              // an empty plain directory instead of a projected one
		iso     string            // under the private directory
		label   string
		want    map[string]string
		wantErr string
	}{{
		name:    "configMap",
		src:     v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}},
		mounted: map[string]string{"app.properties": "a=1\n", "log-level": "debug", ".hidden": "h"},
		iso:     "config-map-disks/vol.iso",
		label:   "cfgdata",
		want:    map[string]string{"app.properties": "a=1\n", "log-level": "debug", ".hidden": "h"},
	}, {
		name:    "secret with a volume label",
		src:     v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "ks", VolumeLabel: "OEMDRV"}},
		mounted: map[string]string{"ks.cfg": "text\n"},
		iso:     "secret-disks/vol.iso",
		label:   "OEMDRV",
		want:    map[string]string{"ks.cfg": "text\n"},
	}, {
		name:    "downwardAPI with paths",
		src:     v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{VolumeLabel: "podinfo"}},
		mounted: map[string]string{"podinfo/labels": `app="web"`, "podinfo/annotations": "", "name": "vm1"},
		iso:     "downwardapi-disks/vol.iso",
		label:   "podinfo",
		want:    map[string]string{"podinfo/labels": `app="web"`, "podinfo/annotations": "", "name": "vm1"},
	}, {
		name:    "serviceAccount",
		src:     v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "default"}},
		mounted: saFiles,
		iso:     "service-account-disk/service-account.iso",
		label:   "cfgdata",
		want:    saFiles,
	}, {
		name:  "optional configMap that does not exist",
		src:   v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
		iso:   "config-map-disks/vol.iso",
		label: "cfgdata",
		want:  map[string]string{},
	}, {
		// The kubelet mounts an empty volume for an optional Secret that
		// does not exist.
		name:  "optional secret mounted empty",
		src:   v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "gone", Optional: ptr(true)}},
		plain: true,
		iso:   "secret-disks/vol.iso",
		label: "cfgdata",
		want:  map[string]string{},
	}, {
		name:    "configMap not mounted",
		src:     v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Optional: ptr(false)}},
		wantErr: `configMap "app-config" not mounted at `,
	}, {
		name:    "secret not mounted",
		src:     v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}},
		wantErr: `secret "s" not mounted at `,
	}, {
		name:    "downwardAPI not mounted",
		src:     v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}},
		wantErr: "downwardAPI files not mounted at ",
	}, {
		name:    "serviceAccount token not mounted",
		src:     v1.VolumeSource{ServiceAccount: &v1.ServiceAccountVolumeSource{ServiceAccountName: "default"}},
		wantErr: `serviceAccount "default" token not mounted at `,
	}, {
		name:    "label longer than 32 characters",
		src:     v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, VolumeLabel: strings.Repeat("L", 33)}},
		mounted: map[string]string{"k": "v"},
		wantErr: `configMap "c": ISO volume label "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL": longer than 32 characters`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			priv, sa := t.TempDir(), filepath.Join(t.TempDir(), "serviceaccount")
			vol := &v1.Volume{Name: "vol", VolumeSource: tc.src}
			d, ok := configDiskOf(priv, sa, vol)
			if !ok {
				t.Fatal("not a config disk")
			}
			switch {
			case tc.plain:
				if err := os.MkdirAll(d.source, 0o755); err != nil {
					t.Fatal(err)
				}
			case tc.mounted != nil:
				launchertest.ProjectedVolume(t, d.source, tc.mounted)
			}
			if err := os.MkdirAll(filepath.Dir(d.iso), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.wantErr == "" {
				if want := filepath.Join(priv, tc.iso); d.iso != want {
					t.Errorf("image at %s, want %s", d.iso, want)
				}
			}
			checkISO(t, d.write(context.Background()), tc.wantErr, d.iso, tc.label, tc.want)
		})
	}
}

func TestConfigFilesLinkLoop(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(".", filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	if _, err := configFiles(dir); err == nil || !strings.Contains(err.Error(), "deeper than 8 directory levels") {
		t.Errorf("configFiles of a link loop = %v, want a depth error", err)
	}
}

// TestConfigDiskReadByLinux checks a config disk with Linux's readers:
// blkid sees the label, isoinfo lists the keys and nothing of the
// kubelet's ..data layout.
func TestConfigDiskReadByLinux(t *testing.T) {
	for _, tool := range []string{"isoinfo", "blkid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required to check ISO images: run hack/setup-libvirt.sh (genisoimage, util-linux)", tool)
		}
	}
	files := map[string]string{"user-data": "#cloud-config\n", "meta-data": "instance-id: x\n", "podinfo/labels": "a=b"}
	for _, label := range []string{"", "cidata"} {
		priv := t.TempDir()
		vol := &v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, VolumeLabel: label}}}
		d, _ := configDiskOf(priv, "", vol)
		launchertest.ProjectedVolume(t, d.source, files)
		if err := os.MkdirAll(filepath.Dir(d.iso), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := d.write(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := label
		if want == "" {
			want = "cfgdata"
		}
		if out := runTool(t, "blkid", "-p", "-o", "export", d.iso); !strings.Contains(out, "\nLABEL="+want+"\n") || !strings.Contains(out, "\nTYPE=iso9660\n") {
			t.Errorf("blkid does not see an iso9660 file system labelled %s:\n%s", want, out)
		}
		listed := strings.Fields(runTool(t, "isoinfo", "-J", "-f", "-i", d.iso))
		sort.Strings(listed)
		if diff := cmp.Diff([]string{"/meta-data", "/podinfo", "/podinfo/labels", "/user-data"}, listed); diff != "" {
			t.Errorf("isoinfo -J -f (-want +got):\n%s", diff)
		}
		for name, data := range files {
			if got := runTool(t, "isoinfo", "-J", "-x", "/"+name, "-i", d.iso); got != data {
				t.Errorf("isoinfo -J -x /%s = %q, want %q", name, got, data)
			}
		}
	}
}
