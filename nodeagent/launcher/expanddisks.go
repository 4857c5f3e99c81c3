package launcher

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
//     it runs through the hypervisor (QEMU extends the file and tells the
//     guest);
//   - a Block claim's disk to its device's size, while the domain runs.
//
// Disks never shrink. Without --expand-disks nothing grows, as KubeVirt
// without the gate.

// expandDisksLocked grows the running domain's claim disks that the guest
// sees smaller than their claims allow.
func (l *Launcher) expandDisksLocked(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	if !l.cfg.ExpandDisks {
		return nil
	}
	seen := map[string]int64{}
	for i := range vmi.Status.VolumeStatus {
		if info := vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo; info != nil {
			if c, ok := info.Capacity[corev1.ResourceStorage]; ok {
				seen[vmi.Status.VolumeStatus[i].Name] = c.Value()
			}
		}
	}
	disks, err := l.h.Disks(ctx, l.domain)
	if err != nil {
		return fmt.Errorf("listing the disks of VMI %s: %w", l.key(), err)
	}
	log := klog.FromContext(ctx)
	for i := range disks {
		d := &disks[i]
		if d.Device == "cdrom" || d.ReadOnly != nil || d.Target == nil || d.Alias == nil || !strings.HasPrefix(d.Alias.Name, "ua-") || d.Source == nil {
			continue
		}
		name := strings.TrimPrefix(d.Alias.Name, "ua-")
		info := claimInfo(vmi, name)
		if info == nil {
			continue // not a claim
		}
		want, err := guestDiskSize(d.Source, info)
		if err != nil {
			log.Error(err, "cannot tell the size the disk may grow to", "vmi", l.key(), "volume", name)
			continue
		}
		have, err := l.h.DiskCapacity(ctx, l.domain, d.Target.Dev)
		if err != nil {
			return fmt.Errorf("the capacity of disk %s of VMI %s: %w", d.Target.Dev, l.key(), err)
		}
		if want <= int64(have) {
			continue
		}
		if err := l.h.ResizeDisk(ctx, l.domain, d.Target.Dev, uint64(want)); err != nil {
			return fmt.Errorf("growing disk %s (volume %s) of VMI %s to %d bytes: %w", d.Target.Dev, name, l.key(), want, err)
		}
		log.Info("grew the disk of a claim that grew", "vmi", l.key(), "volume", name, "target", d.Target.Dev, "from", have, "to", want)
	}
	l.claimSizes = seen
	return nil
}

// guestDiskSize is the size the disk of source may have: a block device's
// size, or imageSize of a file.
func guestDiskSize(src *libvirtxml.DomainDiskSource, info *v1.PersistentVolumeClaimInfo) (int64, error) {
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
