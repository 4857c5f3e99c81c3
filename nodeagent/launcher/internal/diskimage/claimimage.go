package diskimage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's defaults for the disk.img created in an empty Filesystem
// claim (the KubeVirt CR's
// developerConfiguration.pvcTolerateLessSpaceUpToPercent and
// minimumReservePVCBytes), when Config leaves them zero.
const (
	DefaultLessPVCSpaceToleration = 10
	DefaultMinimumPVCReserveBytes = 131072
)

// qemuUser is KubeVirt's qemu user and group, which QEMU runs as.
const qemuUser = 107

// imageAlignment: a created disk.img's size is a multiple of 1 MiB, as
// KubeVirt aligns it (rounded down).
const imageAlignment = 1 << 20

// claimImageSize is the size of the disk.img created in an empty
// Filesystem claim, as KubeVirt's virt-handler sizes it: the claim's
// requests, or the bound volume's capacity when smaller (or when it has no
// requests), rounded down to a multiple of 1 MiB. When the claim's file
// system has less than that free (available, with the reserve already
// kept), the image takes what is free, as long as that falls short by at
// most toleration percent; below that, or under 1 MiB, it is an error (the
// claim is too small). info is the volume's
// status.volumeStatus[].persistentVolumeClaimInfo. It also returns
// whether the size was cut down to the free space.
func claimImageSize(info *v1.PersistentVolumeClaimInfo, available int64, toleration int) (size int64, shrunk bool, err error) {
	if info == nil {
		return 0, false, errors.New("the VMI's status.volumeStatus has no persistentVolumeClaimInfo for it (the VMI controller reports it at the hand-over): the size of a disk.img to create is unknown")
	}
	capacity, hasCapacity := info.Capacity[corev1.ResourceStorage]
	requests, hasRequests := info.Requests[corev1.ResourceStorage]
	if !hasCapacity && !hasRequests {
		return 0, false, fmt.Errorf("claim %s reports neither a capacity nor storage requests: the size of a disk.img to create is unknown", info.ClaimName)
	}
	want := capacity.Value()
	if hasRequests && (!hasCapacity || want > requests.Value()) {
		want = requests.Value()
	}
	size = want - want%imageAlignment
	if size <= 0 {
		return 0, false, fmt.Errorf("claim %s is too small for a disk.img: %d bytes, at least 1 MiB needed", info.ClaimName, want)
	}
	if size <= available {
		return size, false, nil
	}
	if toleration < 0 {
		toleration = 0
	}
	tolerated := size * int64(100-toleration) / 100
	free := available - available%imageAlignment
	if tolerated > available || free <= 0 {
		return 0, false, fmt.Errorf("claim %s is too small: a disk.img of %d bytes does not fit in the %d bytes free on its file system, also with %d%% toleration (pvcTolerateLessSpaceUpToPercent)",
			info.ClaimName, size, max(available, 0), toleration)
	}
	return free, true, nil
}

// ClaimInfo is the persistentVolumeClaimInfo of volume in the VMI's status, or nil.
func ClaimInfo(vmi *v1.VirtualMachineInstance, volume string) *v1.PersistentVolumeClaimInfo {
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == volume {
			return vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo
		}
	}
	return nil
}

// claimSpace is what a claim's file system at dir has free for an image
// (statfs: the blocks available to unprivileged users), less reserve bytes.
func claimSpace(dir string, reserve int64) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of the claim's file system: %w", err)
	}
	return int64(st.Bavail)*int64(st.Bsize) - reserve, nil
}

// imageCreator creates the disk.img of empty Filesystem claims.
type imageCreator struct {
	toleration int   // percent
	reserve    int64 // bytes kept free
	// space reports what dir's file system has free, less reserve.
	space func(dir string, reserve int64) (int64, error)
	// chown, if set, gives a created image to KubeVirt's qemu user.
	chown func(path string) error
}

// imageCreator is c's, its defaults applied.
func (c Config) imageCreator() imageCreator {
	ic := imageCreator{toleration: c.LessPVCSpaceToleration, reserve: c.MinimumPVCReserveBytes, space: claimSpace}
	switch {
	case ic.toleration == 0:
		ic.toleration = DefaultLessPVCSpaceToleration
	case ic.toleration < 0:
		ic.toleration = 0
	}
	switch {
	case ic.reserve == 0:
		ic.reserve = DefaultMinimumPVCReserveBytes
	case ic.reserve < 0:
		ic.reserve = 0
	}
	if os.Geteuid() == 0 {
		// A root launcher's QEMU runs as the qemu user; a non-root
		// launcher is that user and owns what it creates.
		ic.chown = func(path string) error { return os.Lchown(path, qemuUser, qemuUser) }
	}
	return ic
}

// ensure creates img, the disk.img of an empty Filesystem claim mounted at
// dir, as KubeVirt does: a sparse raw file sized by claimImageSize from
// info, mode 0660, owned by the qemu user. An image that exists (also one
// created meanwhile) is left exactly as it is: nothing stored is lost. It
// returns the size of the image it created (0: it existed), and whether
// that size was cut down to the free space (within the toleration).
func (c imageCreator) ensure(dir, img string, info *v1.PersistentVolumeClaimInfo) (created int64, shrunk bool, err error) {
	if _, err := os.Lstat(img); err == nil {
		return 0, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, false, err
	}
	available, err := c.space(dir, c.reserve)
	if err != nil {
		return 0, false, err
	}
	size, shrunk, err := claimImageSize(info, available, c.toleration)
	if err != nil {
		return 0, false, err
	}
	// O_EXCL: an image created since the check above is never truncated.
	f, err := os.OpenFile(img, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o660)
	if errors.Is(err, fs.ErrExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("creating disk.img in the empty claim: %w", err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Chmod(0o660) // whatever the umask: the qemu group may write
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && c.chown != nil {
		err = c.chown(img)
	}
	if err != nil {
		_ = os.Remove(img)
		return 0, false, fmt.Errorf("creating disk.img of %d bytes in the empty claim: %w", size, err)
	}
	return size, shrunk, nil
}
