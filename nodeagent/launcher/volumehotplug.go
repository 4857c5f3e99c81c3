package launcher

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/diskimage"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Volume hotplug (KubeVirt's hotplug volumes, declarative or through
// virtctl addvolume): a hotpluggable claim volume that joins the spec of a
// running VMI is mounted into the pod by the node agent, at
// <HotplugDiskDir>/<volume>, and the launcher attaches it to the guest; a
// volume that leaves the spec is detached, and the node agent unmounts it
// once the guest let it go. There is no attachment pod: the node agent
// mounts the claim straight into the launcher's mount namespace.

// redetachAfter is how long the launcher waits for a guest to release a
// disk it was asked to unplug before it asks again (a guest that was
// still booting may have missed the first request).
const redetachAfter = 30 * time.Second

// dumpFileName is the name KubeVirt gives a memory dump on its claim:
// <vmi>-<claim>-<yyyymmdd-hhmmss>.memory.dump.
func dumpFileName(vmi *v1.VirtualMachineInstance, claim string, at time.Time) string {
	return fmt.Sprintf("%s-%s-%s.memory.dump", vmi.Name, claim, at.UTC().Format("20060102-150405"))
}

// syncMemoryDumpsLocked starts the dump of each memoryDump volume of vmi's
// spec whose claim the node agent mounted and that has none yet; the dump
// runs without the launcher's lock and records its end. Dumps of volumes
// that left the spec are forgotten.
func (l *Launcher) syncMemoryDumpsLocked(ctx context.Context, vmi *v1.VirtualMachineInstance) {
	want := map[string]bool{}
	for i := range vmi.Spec.Volumes {
		vol := &vmi.Spec.Volumes[i]
		if vol.MemoryDump == nil {
			continue
		}
		want[vol.Name] = true
		if slices.ContainsFunc(l.dumps, func(d client.MemoryDump) bool { return d.Volume == vol.Name }) || !diskimage.IsFileName(vol.Name) {
			continue
		}
		dir := filepath.Join(l.cfg.HotplugDiskDir, vol.Name)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue // not mounted yet
		}
		now := time.Now().UTC()
		d := client.MemoryDump{Volume: vol.Name, TargetFileName: dumpFileName(vmi, vol.MemoryDump.ClaimName, now), Start: now}
		l.dumps = append(l.dumps, d)
		path, domain, log := filepath.Join(dir, d.TargetFileName), l.domain, klog.FromContext(ctx)
		log.Info("dumping the guest's memory", "vmi", l.key(), "volume", vol.Name, "file", path)
		go func() {
			err := l.h.MemoryDump(context.Background(), domain, path)
			l.mu.Lock()
			defer l.mu.Unlock()
			for i := range l.dumps {
				if l.dumps[i].Volume == d.Volume && l.dumps[i].Start.Equal(d.Start) {
					l.dumps[i].End = time.Now().UTC()
					if err != nil {
						l.dumps[i].Error = err.Error()
					}
				}
			}
			log.Info("memory dump ended", "vmi", l.key(), "volume", d.Volume, "err", err)
		}()
	}
	l.dumps = slices.DeleteFunc(l.dumps, func(d client.MemoryDump) bool { return !want[d.Volume] })
}

// hotplugged is the volume name of a disk the launcher hot-plugged: its
// alias is ua-<volume> and its image lies under <HotplugDiskDir>/<volume>.
func (l *Launcher) hotplugged(d *libvirtxml.DomainDisk) (string, bool) {
	if d.Alias == nil || !strings.HasPrefix(d.Alias.Name, "ua-") || d.Source == nil {
		return "", false
	}
	name := strings.TrimPrefix(d.Alias.Name, "ua-")
	var path string
	switch {
	case d.Source.File != nil:
		path = d.Source.File.File
	case d.Source.Block != nil:
		path = d.Source.Block.Dev
	}
	dir := filepath.Join(l.cfg.HotplugDiskDir, name)
	return name, path == dir || strings.HasPrefix(path, dir+"/")
}

// syncVolumesLocked attaches the hotpluggable volumes of vmi's spec that
// the node agent has mounted and the guest does not have yet, and detaches
// the hot-plugged disks whose volumes left the spec. What it finds becomes
// Status.HotplugVolumes: an attach or detach that fails is reported on its
// volume (and logged), and the others go on; only a domain whose disks
// cannot be listed fails the sync.
func (l *Launcher) syncVolumesLocked(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	disks, err := l.h.Disks(ctx, l.domain)
	if err != nil {
		return fmt.Errorf("listing the disks of VMI %s: %w", l.key(), err)
	}
	attached := map[string]*libvirtxml.DomainDisk{}
	var inUse []string
	for i := range disks {
		d := &disks[i]
		if d.Target != nil {
			inUse = append(inUse, d.Target.Dev)
		}
		if name, ok := l.hotplugged(d); ok {
			attached[name] = d
		}
	}
	var (
		out  []client.HotplugVolume
		want = map[string]bool{}
	)
	for i := range vmi.Spec.Volumes {
		vol := &vmi.Spec.Volumes[i]
		if !v1.IsHotpluggable(vol) || !diskimage.HasDisk(vmi, vol.Name) {
			continue
		}
		want[vol.Name] = true
		hv := client.HotplugVolume{Name: vol.Name}
		if d, ok := attached[vol.Name]; ok {
			hv.Attached, hv.Target = true, d.Target.Dev
			out = append(out, hv)
			continue
		}
		path := filepath.Join(l.cfg.HotplugDiskDir, vol.Name)
		if !diskimage.IsFileName(vol.Name) {
			hv.Message = fmt.Sprintf("volume name %q cannot name a directory", vol.Name)
		} else if _, err := os.Stat(path); err != nil {
			hv.Message = "waiting for the node agent to mount the volume's claim at " + path
		} else if target, err := l.attachVolumeLocked(ctx, vmi, vol.Name, path, inUse); err != nil {
			hv.Message = "attaching the disk: " + err.Error()
			klog.FromContext(ctx).Error(err, "hot-plugging a volume failed", "vmi", l.key(), "volume", vol.Name)
		} else {
			hv.Attached, hv.Target = true, target
			inUse = append(inUse, target)
			klog.FromContext(ctx).Info("hot-plugged a volume", "vmi", l.key(), "volume", vol.Name, "target", target)
		}
		out = append(out, hv)
	}
	if l.detachAsked == nil {
		l.detachAsked = map[string]time.Time{}
	}
	for _, name := range slices.Sorted(maps.Keys(attached)) {
		if want[name] {
			continue
		}
		d := attached[name]
		hv := client.HotplugVolume{Name: name, Target: d.Target.Dev, Detaching: true}
		if asked, ok := l.detachAsked[name]; !ok || time.Since(asked) > redetachAfter {
			err := l.h.DetachDisk(ctx, l.domain, d.Alias.Name)
			switch {
			case errors.Is(err, hypervisor.ErrNotFound):
				continue // gone between the listing and now
			case err != nil:
				hv.Message = "detaching the disk: " + err.Error()
				klog.FromContext(ctx).Error(err, "unplugging a volume failed", "vmi", l.key(), "volume", name)
			default:
				l.detachAsked[name] = time.Now()
				klog.FromContext(ctx).Info("asked the guest to release a hot-plugged volume", "vmi", l.key(), "volume", name, "target", d.Target.Dev)
			}
		}
		out = append(out, hv)
	}
	for name := range l.detachAsked {
		if _, ok := attached[name]; !ok {
			delete(l.detachAsked, name)
		}
	}
	l.volumes = out
	l.syncMemoryDumpsLocked(ctx, vmi)
	return nil
}

// attachVolumeLocked attaches the claim mounted at path (a Filesystem
// claim's directory, whose disk.img it creates when the claim is empty, or
// a Block claim's device) as the disk of volume name, and returns the
// disk's target.
func (l *Launcher) attachVolumeLocked(ctx context.Context, vmi *v1.VirtualMachineInstance, name, path string, inUse []string) (string, error) {
	src, err := l.disks().ClaimDiskAt(ctx, vmi, name, true, path, path)
	if err != nil {
		return "", err
	}
	disk, err := domainxml.HotplugDisk(l.withNetworkMACs(vmi), name, src, l.opts, inUse)
	if err != nil {
		return "", err
	}
	xml, err := disk.Marshal()
	if err != nil {
		return "", err
	}
	if err := l.h.AttachDisk(ctx, l.domain, xml); err != nil {
		return "", err
	}
	return disk.Target.Dev, nil
}
