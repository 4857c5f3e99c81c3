package launcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

var isoTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// pathEntry is one decoded path table record.
type pathEntry struct {
	Name   string
	Parent int
	LBA    uint32
}

// isoImage decodes what a reader of the image sees through one volume
// descriptor: the path table (both byte orders must agree) and the files
// found by walking the directories from the root.
type isoImage struct {
	Label string
	Path  []pathEntry
	Files map[string]string
	// Dots maps each directory path to the extents its "." and ".." records name.
	Dots map[string][2]uint32
	// Extent maps each directory path to the extent its parent's record names.
	Extent map[string]uint32
}

func readISO(t *testing.T, img []byte, joliet bool) isoImage {
	t.Helper()
	if len(img)%isoSector != 0 {
		t.Fatalf("image size %d is not whole sectors", len(img))
	}
	vd := img[16*isoSector:]
	name := func(b []byte) string { return string(b) }
	if joliet {
		vd = img[17*isoSector:]
		name = func(b []byte) string {
			u := make([]uint16, len(b)/2)
			for i := range u {
				u[i] = binary.BigEndian.Uint16(b[2*i:])
			}
			return string(utf16.Decode(u))
		}
	}
	out := isoImage{Label: strings.TrimRight(name(vd[40:72]), " \x00"), Files: map[string]string{}, Dots: map[string][2]uint32{}, Extent: map[string]uint32{}}
	if got := binary.LittleEndian.Uint32(vd[80:84]); int(got) != len(img)/isoSector {
		t.Errorf("volume space %d sectors, image has %d", got, len(img)/isoSector)
	}
	ptSize := binary.LittleEndian.Uint32(vd[132:136])
	decode := func(lba uint32, order binary.ByteOrder) []pathEntry {
		pt := img[int(lba)*isoSector:][:ptSize]
		var es []pathEntry
		for off := 0; off < len(pt); {
			n := int(pt[off])
			id := pt[off+8 : off+8+n]
			e := pathEntry{Name: name(id), Parent: int(order.Uint16(pt[off+6:])), LBA: order.Uint32(pt[off+2:])}
			if n == 1 && id[0] == 0 {
				e.Name = ""
			}
			es = append(es, e)
			off += 8 + n + n%2
		}
		return es
	}
	out.Path = decode(binary.LittleEndian.Uint32(vd[140:144]), binary.LittleEndian)
	if diff := cmp.Diff(out.Path, decode(binary.BigEndian.Uint32(vd[148:152]), binary.BigEndian)); diff != "" {
		t.Errorf("L and M path tables differ (-L +M):\n%s", diff)
	}
	var walk func(dir string, lba, size uint32)
	walk = func(dir string, lba, size uint32) {
		if size%isoSector != 0 {
			t.Errorf("directory %q: size %d is not whole sectors", dir, size)
		}
		d := img[int(lba)*isoSector:][:size]
		var dots [2]uint32
		for off := 0; off < len(d); {
			if d[off] == 0 { // rest of the sector is padding
				off = (off/isoSector + 1) * isoSector
				continue
			}
			rec := d[off : off+int(d[off])]
			if off/isoSector != (off+len(rec)-1)/isoSector {
				t.Errorf("directory %q: record at %d crosses a sector boundary", dir, off)
			}
			off += len(rec)
			id := rec[33 : 33+int(rec[32])]
			ext, n := binary.LittleEndian.Uint32(rec[2:6]), binary.LittleEndian.Uint32(rec[10:14])
			if len(id) == 1 && id[0] <= 1 {
				dots[id[0]] = ext
				continue
			}
			p := strings.TrimPrefix(dir+"/"+name(id), "/")
			if rec[25]&2 != 0 {
				out.Extent[p] = ext
				walk(p, ext, n)
				continue
			}
			out.Files[strings.TrimSuffix(p, ";1")] = string(img[int(ext)*isoSector:][:n])
		}
		out.Dots[dir] = dots
	}
	root := vd[156:190]
	out.Extent[""] = binary.LittleEndian.Uint32(root[2:6])
	walk("", binary.LittleEndian.Uint32(root[2:6]), binary.LittleEndian.Uint32(root[10:14]))
	return out
}

func TestWriteISOHierarchy(t *testing.T) {
	files := []isoFile{
		{Name: "openstack/latest/meta_data.json", Data: []byte(`{"uuid":"u"}`)},
		{Name: "top", Data: []byte("top")},
		{Name: "openstack/latest/user_data", Data: bytes.Repeat([]byte("u"), 5000)},
		{Name: "openstack/2012-08-10/x", Data: []byte("x")},
		{Name: "ec2/latest/y", Data: []byte("y")},
		{Name: "ec2/empty"},
	}
	var buf bytes.Buffer
	if err := writeISO(&buf, "config-2", isoTime, files); err != nil {
		t.Fatal(err)
	}
	wantFiles := map[string]string{}
	for _, f := range files {
		wantFiles[f.Name] = string(f.Data)
	}
	for _, tc := range []struct {
		joliet bool
		path   []pathEntry // without LBAs
		files  map[string]string
	}{{
		joliet: true,
		// By level, then parent number, then name.
		path: []pathEntry{
			{Name: "", Parent: 1},
			{Name: "ec2", Parent: 1},
			{Name: "openstack", Parent: 1},
			{Name: "latest", Parent: 2},
			{Name: "2012-08-10", Parent: 3},
			{Name: "latest", Parent: 3},
		},
		files: wantFiles,
	}, {
		path: []pathEntry{
			{Name: "", Parent: 1},
			{Name: "EC2", Parent: 1},
			{Name: "OPENSTACK", Parent: 1},
			{Name: "LATEST", Parent: 2},
			{Name: "2012-08-10", Parent: 3},
			{Name: "LATEST", Parent: 3},
		},
		files: map[string]string{
			"OPENSTACK/LATEST/META_DATA.JSON": `{"uuid":"u"}`, "TOP": "top", "OPENSTACK/LATEST/USER_DATA": strings.Repeat("u", 5000),
			"OPENSTACK/2012-08-10/X": "x", "EC2/LATEST/Y": "y", "EC2/EMPTY": "",
		},
	}} {
		t.Run(fmt.Sprintf("joliet=%v", tc.joliet), func(t *testing.T) {
			img := readISO(t, buf.Bytes(), tc.joliet)
			if img.Label != "config-2" {
				t.Errorf("label %q", img.Label)
			}
			if diff := cmp.Diff(tc.files, img.Files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			got := make([]pathEntry, len(img.Path))
			for i, e := range img.Path {
				got[i] = pathEntry{Name: e.Name, Parent: e.Parent}
			}
			if diff := cmp.Diff(tc.path, got); diff != "" {
				t.Fatalf("path table (-want +got):\n%s", diff)
			}
			// Path table extents, "." and ".." agree with the tree.
			full := make([]string, len(img.Path))
			for i, e := range img.Path {
				if i > 0 {
					full[i] = strings.TrimPrefix(full[e.Parent-1]+"/"+e.Name, "/")
				}
				if ext, ok := img.Extent[full[i]]; !ok || ext != e.LBA {
					t.Errorf("directory %q: path table extent %d, directory record %d (found %v)", full[i], e.LBA, ext, ok)
				}
				if want := [2]uint32{e.LBA, img.Path[e.Parent-1].LBA}; img.Dots[full[i]] != want {
					t.Errorf("directory %q: . and .. name %v, want %v", full[i], img.Dots[full[i]], want)
				}
			}
		})
	}
}

// A directory with more records than one sector holds.
func TestWriteISOLargeDirectory(t *testing.T) {
	var files []isoFile
	want := map[string]string{}
	for i := range 100 {
		f := isoFile{Name: fmt.Sprintf("d/file-with-a-long-name-%03d", i), Data: []byte(fmt.Sprint(i))}
		files = append(files, f)
		want[f.Name] = string(f.Data)
	}
	var buf bytes.Buffer
	if err := writeISO(&buf, "big", isoTime, files); err != nil {
		t.Fatal(err)
	}
	if got := readISO(t, buf.Bytes(), true).Files; !cmp.Equal(want, got) {
		t.Errorf("files (-want +got):\n%s", cmp.Diff(want, got))
	}
}

func TestWriteISOInvalidNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{""}, "1-64 characters"},
		{[]string{"a//b"}, "1-64 characters"},
		{[]string{"/a"}, "1-64 characters"},
		{[]string{"a/"}, "1-64 characters"},
		{[]string{"a/../b"}, "1-64 characters"},
		{[]string{"a;1"}, "1-64 characters"},
		{[]string{strings.Repeat("n", 65)}, "1-64 characters"},
		{[]string{"1/2/3/4/5/6/7/8/f"}, "deeper than 8"},
		{[]string{"a/B", "A/b"}, "duplicate"},
		{[]string{"a", "a/b"}, "a is a file"},
		{[]string{"a/b", "a"}, "duplicate"},
	} {
		var files []isoFile
		for _, n := range tc.names {
			files = append(files, isoFile{Name: n})
		}
		if err := writeISO(io.Discard, "x", isoTime, files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("writeISO(%q) = %v, want an error containing %q", tc.names, err, tc.want)
		}
	}
	// The deepest allowed: the root and seven directories.
	if err := writeISO(io.Discard, "x", isoTime, []isoFile{{Name: "1/2/3/4/5/6/7/f"}, {Name: strings.Repeat("n", 64)}}); err != nil {
		t.Errorf("8 levels and a 64-character name: %v", err)
	}
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
			l := diskLauncher(t)
			l.cfg.PrivateDir = t.TempDir()
			for k, v := range tc.secret {
				p := filepath.Join(l.cfg.PrivateDir, "secret", "cloudinit", k)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			vmi, vol := configDriveVMI(&tc.src)
			vmi.Spec.Domain.Firmware, vmi.Spec.Hostname = tc.fw, tc.host
			path := filepath.Join(t.TempDir(), "configdrive.iso")
			err := l.configDriveISO(vmi, vol, path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("configDriveISO = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			img := readISO(t, b, true)
			if img.Label != "config-2" {
				t.Errorf("label %q, want config-2", img.Label)
			}
			if diff := cmp.Diff(tc.want, img.Files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			var meta map[string]any
			if err := json.Unmarshal([]byte(img.Files["openstack/latest/meta_data.json"]), &meta); err != nil {
				t.Errorf("meta_data.json: %v", err)
			}
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
			l := diskLauncher(t)
			l.cfg.PrivateDir = t.TempDir()
			for k, v := range tc.secret {
				p := filepath.Join(l.cfg.PrivateDir, "secret", "cloudinit", k)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			vmi := &v1.VirtualMachineInstance{}
			vmi.Name, vmi.Namespace, vmi.UID = "vm1", "ns", types.UID(diskUID)
			vmi.Spec.Domain.Firmware, vmi.Spec.Hostname = tc.fw, tc.host
			vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &tc.src}}}
			path := filepath.Join(t.TempDir(), "noCloud.iso")
			err := l.noCloudISO(vmi, &vmi.Spec.Volumes[0], path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("noCloudISO = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			img := readISO(t, b, true)
			if img.Label != "cidata" {
				t.Errorf("label %q, want cidata", img.Label)
			}
			if diff := cmp.Diff(tc.want, img.Files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
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
	l := diskLauncher(t)
	vmi, vol := configDriveVMI(&v1.CloudInitConfigDriveSource{UserData: "#cloud-config\nhostname: x\n", NetworkData: `{"links":[]}`})
	iso := filepath.Join(t.TempDir(), "configdrive.iso")
	if err := l.configDriveISO(vmi, vol, iso); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"openstack/latest/meta_data.json":    `{"instance_id":"vm1.ns","uuid":"` + diskUID + `","hostname":"vm1"}`,
		"openstack/latest/user_data":         "#cloud-config\nhostname: x\n",
		"openstack/latest/network_data.json": `{"links":[]}`,
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	if out := run("blkid", "-p", "-o", "export", iso); !strings.Contains(out, "\nLABEL=config-2\n") || !strings.Contains(out, "\nTYPE=iso9660\n") {
		t.Errorf("blkid does not see an iso9660 file system labelled config-2:\n%s", out)
	}
	listed := strings.Fields(run("isoinfo", "-J", "-f", "-i", iso))
	wantListed := []string{"/openstack", "/openstack/latest", "/openstack/latest/meta_data.json", "/openstack/latest/network_data.json", "/openstack/latest/user_data"}
	if diff := cmp.Diff(wantListed, listed); diff != "" {
		t.Errorf("isoinfo -J -f (-want +got):\n%s", diff)
	}
	for name, data := range want {
		if got := run("isoinfo", "-J", "-x", "/"+name, "-i", iso); got != data {
			t.Errorf("isoinfo -J -x /%s = %q, want %q", name, got, data)
		}
	}
	// A directory over several sectors, read by isoinfo too.
	var big []isoFile
	for i := range 100 {
		big = append(big, isoFile{Name: fmt.Sprintf("a/b/file-with-a-long-name-%03d", i), Data: []byte(fmt.Sprint(i))})
	}
	var buf bytes.Buffer
	if err := writeISO(&buf, "big", isoTime, big); err != nil {
		t.Fatal(err)
	}
	bigISO := filepath.Join(t.TempDir(), "big.iso")
	if err := os.WriteFile(bigISO, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(run("isoinfo", "-J", "-f", "-i", bigISO))); n != 102 {
		t.Errorf("isoinfo lists %d entries in the large image, want 102", n)
	}
	if got := run("isoinfo", "-J", "-x", "/a/b/file-with-a-long-name-099", "-i", bigISO); got != "99" {
		t.Errorf("isoinfo -x of the last file = %q", got)
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
		run("mount", "-o", "loop,ro", "-t", "iso9660", iso, dir)
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
	l := diskLauncher(t)
	l.cfg.EphemeralDiskDir, l.cfg.PrivateDir = t.TempDir(), t.TempDir()
	vmi, _ := configDriveVMI(&v1.CloudInitConfigDriveSource{UserData: "#cloud-config\n"})
	opts, _, err := l.prepare(context.Background(), vmi)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(l.cfg.EphemeralDiskDir, "cloud-init-data/ns/vm1/configdrive.iso")
	if got := opts.CloudInitISOs["cloudinit"]; got != want {
		t.Errorf("CloudInitISOs[cloudinit] = %q, want %q", got, want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Error(err)
	}
	vmi, _ = configDriveVMI(&v1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}})
	if _, _, err := l.prepare(context.Background(), vmi); err == nil || !strings.HasPrefix(err.Error(), "spec.volumes[0] (cloudinit): user data: secret not mounted") {
		t.Errorf("prepare with an unmounted secret: %v", err)
	}
}
