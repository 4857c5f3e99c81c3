package launcher

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/diskimage"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's ExpandDisks (see package diskimage, which grows a claim's
// disk.img before the domain starts): while the domain runs, the
// hypervisor grows its disks of claims that grew.

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
		info := diskimage.ClaimInfo(vmi, name)
		if info == nil {
			continue // not a claim
		}
		want, err := diskimage.GuestDiskSize(d.Source, info)
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
