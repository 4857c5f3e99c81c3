package diskimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's ExpandDisks: when a claim grows (its status.capacity, which
// the VMI controller copies into the VMI's
// status.volumeStatus[].persistentVolumeClaimInfo), the guest's disk grows
// with it:
//
//   - a Filesystem claim's disk.img to (1 - filesystemOverhead) times the
//     capacity, or what the file system can hold (its free space plus what
//     the image already takes) when less, rounded down to 1 MiB; before the
//     domain starts by extending the sparse file (expandImageOffline), while
//     it runs through the hypervisor (the launcher's part: QEMU extends the
//     file and tells the guest);
//   - a Block claim's disk to its device's size, while the domain runs.
//
// Disks never shrink. Without --expand-disks nothing grows, as KubeVirt
// without the gate.

// GuestDiskSize is the size the disk of source may have: a block device's
// size, or imageSize of a file.
func GuestDiskSize(src *libvirtxml.DomainDiskSource, info *v1.PersistentVolumeClaimInfo) (int64, error) {
	switch {
	case src.Block != nil:
		f, err := os.Open(src.Block.Dev)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return f.Seek(0, io.SeekEnd)
	case src.File != nil:
		return imageSize(src.File.File, info)
	}
	return 0, fmt.Errorf("the disk has neither a file nor a block device")
}

// imageSize is the size a Filesystem claim's disk.img at img may grow to:
// (1 - overhead) × min(capacity, free space + the image's allocation),
// rounded down to 1 MiB, as KubeVirt's possibleGuestSize.
func imageSize(img string, info *v1.PersistentVolumeClaimInfo) (int64, error) {
	capacity, ok := info.Capacity[corev1.ResourceStorage]
	if !ok {
		return 0, fmt.Errorf("claim %s reports no capacity", info.ClaimName)
	}
	overhead := 0.0
	if info.FilesystemOverhead != nil {
		o, err := strconv.ParseFloat(*info.FilesystemOverhead, 64)
		if err != nil || o < 0 || o > 1 {
			return 0, fmt.Errorf("claim %s: filesystem overhead %q is not a number from 0 to 1", info.ClaimName, *info.FilesystemOverhead)
		}
		overhead = o
	}
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		return 0, fmt.Errorf("claim %s: %w", info.ClaimName, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(img), &fs); err != nil {
		return 0, fmt.Errorf("claim %s: free space: %w", info.ClaimName, err)
	}
	preferred := min(capacity.Value(), int64(fs.Bavail)*int64(fs.Bsize)+st.Blocks*512)
	size := int64((1 - overhead) * float64(preferred))
	return size - size%imageAlignment, nil
}

// expandImageOffline extends the sparse disk.img of a claim that grew
// before the domain is defined, so the guest boots with the larger disk.
func expandImageOffline(ctx context.Context, img string, info *v1.PersistentVolumeClaimInfo) error {
	if info == nil {
		return nil
	}
	want, err := imageSize(img, info)
	if err != nil {
		klog.FromContext(ctx).Error(err, "cannot tell the size the disk may grow to", "image", img)
		return nil
	}
	fi, err := os.Stat(img)
	if err != nil {
		return err
	}
	if want <= fi.Size() {
		return nil
	}
	if err := os.Truncate(img, want); err != nil {
		return fmt.Errorf("growing %s to %d bytes (claim %s grew): %w", img, want, info.ClaimName, err)
	}
	klog.FromContext(ctx).Info("grew the disk.img of a claim that grew", "image", img, "claim", info.ClaimName, "from", fi.Size(), "to", want)
	return nil
}
