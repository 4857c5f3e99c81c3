package diskimage

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
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/launchertest"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestWriteISO: files in nested directories keep their names (long ones
// too), contents and permissions; the label is the volume ID; the image
// replaces what was at the path.
func TestWriteISO(t *testing.T) {
	files := []isoFile{
		{Name: "openstack/latest/meta_data.json", Data: []byte(`{"uuid":"u"}`)},
		{Name: "top", Data: []byte("top"), Mode: 0o400},
		{Name: "openstack/content/0000", Data: nil},
		{Name: "a/b/c/d/e/f/g/" + strings.Repeat("n", 100), Data: []byte("deep and long")},
	}
	path := filepath.Join(t.TempDir(), "config.iso")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeISO(context.Background(), path, "config-2", files); err != nil {
		t.Fatal(err)
	}
	got := launchertest.ReadISO(t, path)
	want := launchertest.ISOImage{
		Label: "config-2",
		Files: map[string]string{
			"openstack/latest/meta_data.json": `{"uuid":"u"}`,
			"top":                             "top",
			"openstack/content/0000":          "",
			"a/b/c/d/e/f/g/" + strings.Repeat("n", 100): "deep and long",
		},
		Modes: map[string]fs.FileMode{
			"openstack/latest/meta_data.json": 0o644,
			"top":                             0o400,
			"openstack/content/0000":          0o644,
			"a/b/c/d/e/f/g/" + strings.Repeat("n", 100): 0o644,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("image mode %v, want 0640", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".iso-*")); len(left) != 0 {
		t.Errorf("staging left behind: %v", left)
	}
}

func TestWriteISOErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		label string
		files []string
		want  string
	}{
		{"label too long", strings.Repeat("L", 33), []string{"a"}, "longer than 32 characters"},
		{"absolute name", "x", []string{"/etc/passwd"}, `ISO file name "/etc/passwd": not a clean relative path`},
		{"name out of the root", "x", []string{"a/../../b"}, "not a clean relative path"},
		{"unclean name", "x", []string{"a//b"}, "not a clean relative path"},
		{"empty name", "x", []string{""}, "not a clean relative path"},
		{"duplicate", "x", []string{"a", "a"}, `ISO file "a": `},
		{"file where a directory goes", "x", []string{"a", "a/b"}, `ISO file "a/b": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files []isoFile
			for _, n := range tc.files {
				files = append(files, isoFile{Name: n})
			}
			dir := t.TempDir()
			err := writeISO(context.Background(), filepath.Join(dir, "x.iso"), tc.label, files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("writeISO(%q, %q) = %v, want an error containing %q", tc.label, tc.files, err, tc.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("left in the directory: %v", left)
			}
		})
	}
	t.Run("xorrisofs not in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		err := writeISO(context.Background(), filepath.Join(t.TempDir(), "x.iso"), "x", nil)
		if err == nil || !strings.Contains(err.Error(), "install Debian's xorriso package") {
			t.Errorf("writeISO without xorrisofs = %v, want an error naming the package", err)
		}
	})
}

// checkISO checks the outcome of writing an image at path: an error
// containing wantErr when it is set, else an image labelled label that holds
// the files want.
func checkISO(t *testing.T, err error, wantErr, path, label string, want map[string]string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got error %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	img := launchertest.ReadISO(t, path)
	if img.Label != label {
		t.Errorf("label %q, want %q", img.Label, label)
	}
	if diff := cmp.Diff(want, img.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// cloudInitConfig is a disk configuration whose private directory holds
// secret's files where the pod mounts the Secret of a cloud-init volume
// named "cloudinit".
func cloudInitConfig(t *testing.T, secret map[string]string) *Config {
	t.Helper()
	c := diskConfig(t)
	c.PrivateDir = t.TempDir()
	for k, v := range secret {
		p := filepath.Join(c.PrivateDir, "secret", "cloudinit", k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func configDriveVMI(src *v1.CloudInitConfigDriveSource) (*v1.VirtualMachineInstance, *v1.Volume) {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm1", "ns", types.UID(diskUID)
	vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitConfigDrive: src}}}
	return vmi, &vmi.Spec.Volumes[0]
}

func TestConfigDriveISO(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     v1.CloudInitConfigDriveSource
		secret  map[string]string
		fw      *v1.Firmware
		host    string
		want    map[string]string
		wantErr string
	}{{
		name: "inline",
		src:  v1.CloudInitConfigDriveSource{UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
		want: map[string]string{
			"openstack/latest/meta_data.json":    `{"instance_id":"vm1.ns","uuid":"` + diskUID + `","hostname":"vm1"}`,
			"openstack/latest/user_data":         "#cloud-config\n",
			"openstack/latest/network_data.json": "version: 2\n",
		},
	}, {
		name: "base64, firmware UUID and hostname",
		src:  v1.CloudInitConfigDriveSource{UserDataBase64: "I2Nsb3VkLWNvbmZpZwo="},
		fw:   &v1.Firmware{UUID: "5d307ca9-b3ef-428c-8861-06e72d69f223"},
		host: "web",
		want: map[string]string{
			"openstack/latest/meta_data.json": `{"instance_id":"vm1.ns","uuid":"5d307ca9-b3ef-428c-8861-06e72d69f223","hostname":"web"}`,
			"openstack/latest/user_data":      "#cloud-config\n",
		},
	}, {
		name:   "secrets",
		src:    v1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "s"}},
		secret: map[string]string{"userData": "#!/bin/sh\n", "networkdata": "{}"},
		want: map[string]string{
			"openstack/latest/meta_data.json":    `{"instance_id":"vm1.ns","uuid":"` + diskUID + `","hostname":"vm1"}`,
			"openstack/latest/user_data":         "#!/bin/sh\n",
			"openstack/latest/network_data.json": "{}",
		},
	}, {
		name:    "secret not mounted",
		src:     v1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}},
		wantErr: "user data: secret not mounted at ",
	}, {
		name:    "bad base64",
		src:     v1.CloudInitConfigDriveSource{NetworkDataBase64: "!"},
		wantErr: "network data: illegal base64",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := cloudInitConfig(t, tc.secret)
			vmi, vol := configDriveVMI(&tc.src)
			vmi.Spec.Domain.Firmware, vmi.Spec.Hostname = tc.fw, tc.host
			path := filepath.Join(t.TempDir(), "configdrive.iso")
			err := c.configDriveISO(context.Background(), vmi, vol, path)
			checkISO(t, err, tc.wantErr, path, "config-2", tc.want)
		})
	}
}

// TestNoCloudISO: the cidata image holds meta-data (the firmware UUID as
// the instance ID, else the VMI's UID; the hostname), the user data and the
// network config, from inline, base64 or Secret sources.
func TestNoCloudISO(t *testing.T) {
	const fwUUID = "5d307ca9-b3ef-428c-8861-06e72d69f223"
	for _, tc := range []struct {
		name    string
		src     v1.CloudInitNoCloudSource
		secret  map[string]string
		fw      *v1.Firmware
		host    string
		want    map[string]string
		wantErr string
	}{{
		name: "inline",
		src:  v1.CloudInitNoCloudSource{UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
		want: map[string]string{
			"meta-data":      "instance-id: " + diskUID + "\nlocal-hostname: vm1\n",
			"user-data":      "#cloud-config\n",
			"network-config": "version: 2\n",
		},
	}, {
		name: "base64, firmware UUID and hostname",
		src:  v1.CloudInitNoCloudSource{UserDataBase64: "I2Nsb3VkLWNvbmZpZwo=", NetworkDataBase64: "dmVyc2lvbjogMQo="},
		fw:   &v1.Firmware{UUID: fwUUID},
		host: "web",
		want: map[string]string{
			"meta-data":      "instance-id: " + fwUUID + "\nlocal-hostname: web\n",
			"user-data":      "#cloud-config\n",
			"network-config": "version: 1\n",
		},
	}, {
		name:   "secrets",
		src:    v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "s"}},
		secret: map[string]string{"userdata": "#!/bin/sh\n", "networkData": "version: 2\n"},
		want: map[string]string{
			"meta-data":      "instance-id: " + diskUID + "\nlocal-hostname: vm1\n",
			"user-data":      "#!/bin/sh\n",
			"network-config": "version: 2\n",
		},
	}, {
		name:    "network secret not mounted",
		src:     v1.CloudInitNoCloudSource{UserData: "#cloud-config\n", NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "s"}},
		wantErr: "network data: secret not mounted at ",
	}, {
		name:    "bad base64",
		src:     v1.CloudInitNoCloudSource{UserDataBase64: "!"},
		wantErr: "user data: illegal base64",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := cloudInitConfig(t, tc.secret)
			vmi := &v1.VirtualMachineInstance{}
			vmi.Name, vmi.Namespace, vmi.UID = "vm1", "ns", types.UID(diskUID)
			vmi.Spec.Domain.Firmware, vmi.Spec.Hostname = tc.fw, tc.host
			vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &tc.src}}}
			path := filepath.Join(t.TempDir(), "noCloud.iso")
			err := c.noCloudISO(context.Background(), vmi, &vmi.Spec.Volumes[0], path)
			checkISO(t, err, tc.wantErr, path, "cidata", tc.want)
		})
	}
}

// runTool runs a command that reads or mounts an image and returns its
// output, failing the test when the command fails.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestISOReadByLinux checks that Linux's own readers see the config drive:
// blkid (what cloud-init uses to find the config-2 label), isoinfo and,
// where the kernel has an iso9660 driver, a read-only loop mount.
func TestISOReadByLinux(t *testing.T) {
	if testing.Short() {
		t.Skip("integration check: reads the image with blkid, isoinfo and mount")
	}
	for tool, install := range map[string]string{"isoinfo": "apt-get install -y genisoimage", "blkid": "apt-get install -y util-linux"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required to check ISO images: install it with `%s`", tool, install)
		}
	}
	c := diskConfig(t)
	vmi, vol := configDriveVMI(&v1.CloudInitConfigDriveSource{UserData: "#cloud-config\nhostname: x\n", NetworkData: `{"links":[]}`})
	iso := filepath.Join(t.TempDir(), "configdrive.iso")
	if err := c.configDriveISO(context.Background(), vmi, vol, iso); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"openstack/latest/meta_data.json":    `{"instance_id":"vm1.ns","uuid":"` + diskUID + `","hostname":"vm1"}`,
		"openstack/latest/user_data":         "#cloud-config\nhostname: x\n",
		"openstack/latest/network_data.json": `{"links":[]}`,
	}

	if out := runTool(t, "blkid", "-p", "-o", "export", iso); !strings.Contains(out, "\nLABEL=config-2\n") || !strings.Contains(out, "\nTYPE=iso9660\n") {
		t.Errorf("blkid does not see an iso9660 file system labelled config-2:\n%s", out)
	}
	listed := strings.Fields(runTool(t, "isoinfo", "-J", "-f", "-i", iso))
	wantListed := []string{"/openstack", "/openstack/latest", "/openstack/latest/meta_data.json", "/openstack/latest/network_data.json", "/openstack/latest/user_data"}
	if diff := cmp.Diff(wantListed, listed); diff != "" {
		t.Errorf("isoinfo -J -f (-want +got):\n%s", diff)
	}
	for name, data := range want {
		if got := runTool(t, "isoinfo", "-J", "-x", "/"+name, "-i", iso); got != data {
			t.Errorf("isoinfo -J -x /%s = %q, want %q", name, got, data)
		}
	}
	// Rock Ridge names, as Linux reads them by default.
	rr := strings.Fields(runTool(t, "isoinfo", "-R", "-f", "-i", iso))
	if diff := cmp.Diff(wantListed, rr); diff != "" {
		t.Errorf("isoinfo -R -f (-want +got):\n%s", diff)
	}

	t.Run("mount", func(t *testing.T) {
		fs, err := os.ReadFile("/proc/filesystems")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(fs), "iso9660") {
			// Nothing to install: the running kernel has no iso9660 driver
			// (and it is not a module this test can load).
			t.Skipf("the kernel has no iso9660 file system (not in /proc/filesystems); blkid and isoinfo checked the image")
		}
		if os.Geteuid() != 0 {
			t.Fatalf("mounting the image needs root: run this test as root, or with -short")
		}
		dir := t.TempDir()
		runTool(t, "mount", "-o", "loop,ro", "-t", "iso9660", iso, dir)
		t.Cleanup(func() {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v\n%s", dir, err, out)
			}
		})
		for name, data := range want {
			if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != data {
				t.Errorf("mounted %s = %q, %v; want %q", name, got, err, data)
			}
		}
	})
}

// prepare writes the config drive where domainxml looks for it and names
// the volume in its errors.
func TestPrepareConfigDrive(t *testing.T) {
	c := diskConfig(t)
	c.EphemeralDiskDir, c.PrivateDir = t.TempDir(), t.TempDir()
	vmi, _ := configDriveVMI(&v1.CloudInitConfigDriveSource{UserData: "#cloud-config\n"})
	opts, _, err := prepare(context.Background(), c, vmi)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(c.EphemeralDiskDir, "cloud-init-data/ns/vm1/configdrive.iso")
	if got := opts.CloudInitISOs["cloudinit"]; got != want {
		t.Errorf("CloudInitISOs[cloudinit] = %q, want %q", got, want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Error(err)
	}
	vmi, _ = configDriveVMI(&v1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}})
	if _, _, err := prepare(context.Background(), c, vmi); err == nil || !strings.HasPrefix(err.Error(), "spec.volumes[0] (cloudinit): user data: secret not mounted") {
		t.Errorf("prepare with an unmounted secret: %v", err)
	}
}

// BenchmarkWriteISO writes a NoCloud image of the size a cloud-config
// usually has (1 KiB of user data).
func BenchmarkWriteISO(b *testing.B) {
	files := []isoFile{
		{Name: "meta-data", Data: []byte("instance-id: 5d307ca9-b3ef-428c-8861-06e72d69f223\nlocal-hostname: vm1\n")},
		{Name: "user-data", Data: []byte("#cloud-config\n" + strings.Repeat("# padding line of a cloud-config\n", 32))},
	}
	path := filepath.Join(b.TempDir(), "noCloud.iso")
	for b.Loop() {
		if err := writeISO(context.Background(), path, "cidata", files); err != nil {
			b.Fatal(err)
		}
	}
}
