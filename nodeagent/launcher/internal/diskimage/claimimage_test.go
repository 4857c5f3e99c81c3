package diskimage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const mib = 1 << 20

// pvcInfo is a claim's persistentVolumeClaimInfo; "" leaves a quantity out.
func pvcInfo(requests, capacity string) *v1.PersistentVolumeClaimInfo {
	fs := corev1.PersistentVolumeFilesystem
	info := &v1.PersistentVolumeClaimInfo{ClaimName: "data", VolumeMode: &fs}
	if requests != "" {
		info.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(requests)}
	}
	if capacity != "" {
		info.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	return info
}

// TestClaimImageSize: KubeVirt's sizing of the disk.img of an empty
// Filesystem claim.
func TestClaimImageSize(t *testing.T) {
	const plenty = 1 << 40
	for _, tc := range []struct {
		name       string
		info       *v1.PersistentVolumeClaimInfo
		available  int64
		toleration int
		want       int64
		wantShrunk bool
		wantErr    string
	}{
		{name: "capacity equals requests", info: pvcInfo("16Mi", "16Mi"), available: plenty, toleration: 10, want: 16 * mib},
		{name: "the provisioner gave more than requested: the requests", info: pvcInfo("16Mi", "1Gi"), available: plenty, toleration: 10, want: 16 * mib},
		{name: "capacity below the requests: the capacity", info: pvcInfo("1Gi", "500Mi"), available: plenty, toleration: 10, want: 500 * mib},
		{name: "not bound yet: the requests", info: pvcInfo("64Mi", ""), available: plenty, toleration: 10, want: 64 * mib},
		{name: "capacity only", info: pvcInfo("", "32Mi"), available: plenty, toleration: 10, want: 32 * mib},
		{name: "rounded down to 1 MiB", info: pvcInfo("16M", "16M"), available: plenty, toleration: 10, want: 15 * mib},
		{name: "decimal gigabyte", info: pvcInfo("1G", "1G"), available: plenty, toleration: 10, want: 953 * mib},
		{name: "exactly the free space", info: pvcInfo("16Mi", "16Mi"), available: 16 * mib, toleration: 10, want: 16 * mib},
		{name: "free space short within the toleration: the free space, aligned", info: pvcInfo("100Mi", "100Mi"), available: 95*mib + 1000,
			toleration: 10, want: 95 * mib, wantShrunk: true},
		{name: "free space short by exactly the toleration", info: pvcInfo("100Mi", "100Mi"), available: 90 * mib, toleration: 10, want: 90 * mib, wantShrunk: true},
		{name: "free space short beyond the toleration", info: pvcInfo("100Mi", "100Mi"), available: 90*mib - 1, toleration: 10,
			wantErr: "claim data is too small: a disk.img of 104857600 bytes does not fit in the 94371839 bytes free on its file system, also with 10% toleration"},
		{name: "no toleration", info: pvcInfo("100Mi", "100Mi"), available: 100*mib - 1, toleration: 0, wantErr: "claim data is too small"},
		{name: "reserve larger than the free space", info: pvcInfo("16Mi", "16Mi"), available: -4096, toleration: 10,
			wantErr: "does not fit in the 0 bytes free"},
		{name: "under 1 MiB", info: pvcInfo("1000Ki", "1000Ki"), available: plenty, toleration: 10,
			wantErr: "claim data is too small for a disk.img: 1024000 bytes, at least 1 MiB needed"},
		{name: "no sizes", info: pvcInfo("", ""), available: plenty, toleration: 10, wantErr: "claim data reports neither a capacity nor storage requests"},
		{name: "no claim info in the status", available: plenty, toleration: 10, wantErr: "status.volumeStatus has no persistentVolumeClaimInfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, shrunk, err := claimImageSize(tc.info, tc.available, tc.toleration)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("claimImageSize = %d, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || shrunk != tc.wantShrunk {
				t.Fatalf("claimImageSize = %d, shrunk %v, %v; want %d, shrunk %v", got, shrunk, err, tc.want, tc.wantShrunk)
			}
		})
	}
}

// freeSpace reports a fixed free space and records the reserve asked for.
type freeSpace struct {
	bytes   int64
	reserve int64
}

func (f *freeSpace) space(_ string, reserve int64) (int64, error) {
	f.reserve = reserve
	return f.bytes - reserve, nil
}

// TestEnsureCreatesSparseImage: an empty claim gets a sparse raw disk.img of
// the claim's size, 0660, owned by the qemu user when the launcher is root,
// with the default reserve kept free.
func TestEnsureCreatesSparseImage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	free := &freeSpace{bytes: 1 << 40}
	c := Config{}.imageCreator()
	c.space = free.space
	size, shrunk, err := c.ensure(dir, img, pvcInfo("16Mi", "16Mi"))
	if err != nil || size != 16*mib || shrunk {
		t.Fatalf("ensure = %d, %v, %v; want 16 MiB created", size, shrunk, err)
	}
	if free.reserve != DefaultMinimumPVCReserveBytes {
		t.Errorf("reserve %d, want KubeVirt's default %d", free.reserve, DefaultMinimumPVCReserveBytes)
	}
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Size() != 16*mib || fi.Mode().Perm() != 0o660 || st.Blocks*512 >= fi.Size() {
		t.Errorf("disk.img: %d bytes, mode %v, %d bytes allocated; want 16 MiB, 0660, sparse", fi.Size(), fi.Mode().Perm(), st.Blocks*512)
	}
	if os.Geteuid() == 0 && (st.Uid != qemuUser || st.Gid != qemuUser) {
		t.Errorf("disk.img owned by %d:%d, want the qemu user %d:%d", st.Uid, st.Gid, qemuUser, qemuUser)
	}
	if data, err := os.ReadFile(img); err != nil || strings.Trim(string(data), "\x00") != "" {
		t.Errorf("disk.img is not blank (%v)", err)
	}
}

// TestEnsureLeavesExistingImage: a claim that holds disk.img keeps it
// exactly as it is (contents, size, mode, owner, times), whatever its claim
// info says and however little space is free; nothing is even asked.
func TestEnsureLeavesExistingImage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	data := "the guest's data, not 16 MiB"
	writeFile(t, img, data)
	if err := os.Chmod(img, 0o600); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(img, past, past); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	c := imageCreator{toleration: 10, reserve: DefaultMinimumPVCReserveBytes,
		space: func(string, int64) (int64, error) { return 0, errors.New("the free space was asked") },
		chown: func(string) error { return errors.New("the image was chowned") }}
	for _, info := range []*v1.PersistentVolumeClaimInfo{pvcInfo("16Mi", "16Mi"), nil} {
		size, _, err := c.ensure(dir, img, info)
		if err != nil || size != 0 {
			t.Fatalf("ensure with claim info %+v = %d, %v; want the existing image kept", info, size, err)
		}
	}
	after, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	b, a := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if got, _ := os.ReadFile(img); string(got) != data || after.Size() != before.Size() || after.Mode() != before.Mode() ||
		!after.ModTime().Equal(past) || a.Uid != b.Uid || a.Gid != b.Gid || a.Ino != b.Ino {
		t.Errorf("disk.img changed: %q, %d bytes, %v, %v, %d:%d; was %q, %d bytes, %v, %v, %d:%d",
			got, after.Size(), after.Mode(), after.ModTime(), a.Uid, a.Gid, data, before.Size(), before.Mode(), past, b.Uid, b.Gid)
	}
}

// TestEnsureRefusesSmallClaim: a claim whose file system cannot hold the
// image, even with the toleration, is refused and left empty.
func TestEnsureRefusesSmallClaim(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	free := &freeSpace{bytes: 8 * mib}
	c := imageCreator{toleration: 10, reserve: DefaultMinimumPVCReserveBytes, space: free.space}
	_, _, err := c.ensure(dir, img, pvcInfo("16Mi", "16Mi"))
	if err == nil || !strings.Contains(err.Error(), "claim data is too small") {
		t.Fatalf("ensure = %v, want the claim refused as too small", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the claim holds %v after the refusal", entries)
	}
}

// TestClaimSpace: the reserve is taken off the file system's free space.
func TestClaimSpace(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	got, err := claimSpace(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Other writers on the machine move the free space between the calls.
	if want := int64(st.Bavail)*int64(st.Bsize) - 1<<20; got < want-64*mib || got > want+64*mib {
		t.Errorf("claimSpace = %d, want about %d", got, want)
	}
	if _, err := claimSpace(filepath.Join(dir, "missing"), 0); err == nil {
		t.Error("claimSpace of a missing directory succeeded")
	}
}

// TestPrepareCreatesClaimImage: through prepare, an empty Filesystem claim
// (persistentVolumeClaim or dataVolume) gets disk.img sized from the VMI's
// status and the domain uses it; without the claim's info in the status,
// or for an ephemeral volume's base claim, nothing is created and the
// error names the volume.
func TestPrepareCreatesClaimImage(t *testing.T) {
	pvc := v1.Volume{Name: "datadisk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	dv := v1.Volume{Name: "datadisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data"}}}
	eph := v1.Volume{Name: "datadisk", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	withInfo := []v1.VolumeStatus{{Name: "datadisk", PersistentVolumeClaimInfo: pvcInfo("16Mi", "16Mi")}}
	for _, tc := range []struct {
		name    string
		vol     v1.Volume
		status  []v1.VolumeStatus
		wantErr string
	}{
		{name: "persistentVolumeClaim", vol: pvc, status: withInfo},
		{name: "dataVolume", vol: dv, status: withInfo},
		{name: "no claim info", vol: pvc, wantErr: "spec.volumes[0] (datadisk): the claim's file system (mounted at "},
		{name: "ephemeral base claim", vol: eph, status: withInfo, wantErr: "spec.volumes[0] (datadisk): the claim's file system (mounted at "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := diskConfig(t)
			c.EphemeralDiskDir, c.PrivateDir, c.DeviceDir, c.QEMUImg = t.TempDir(), t.TempDir(), t.TempDir(), "none"
			mount := filepath.Join(c.PrivateDir, "vmi-disks", tc.vol.Name)
			mkdirAll(t, mount)
			vmi := hostDiskVMI(v1.HostDisk{})
			vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: tc.vol.Name}}
			vmi.Spec.Volumes = []v1.Volume{tc.vol}
			vmi.Status.VolumeStatus = tc.status
			opts, _, err := prepare(context.Background(), c, vmi)
			img := filepath.Join(mount, "disk.img")
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("prepare = %v, want an error starting with %q", err, tc.wantErr)
				}
				if _, err := os.Stat(img); err == nil {
					t.Error("disk.img was created")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := opts.Disks[tc.vol.Name]; got.Path != img || got.Format != "raw" || got.Block {
				t.Errorf("disk %+v, want the raw file %s", got, img)
			}
			if fi, err := os.Stat(img); err != nil || fi.Size() != 16*mib {
				t.Errorf("disk.img: %v; want 16 MiB", err)
			}
		})
	}
}
