package domainxml

import (
	"fmt"
	"maps"
	"slices"

	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// HotplugDisk is the <disk> of vmi's hotpluggable volume name, its image at
// src: what the launcher attaches to the running domain. It is the disk
// Convert renders when opts.Disks holds src, so every field of the spec's
// disk (bus, cache, I/O mode, serial, boot order...) is checked and
// rendered once, in one place; opts are those the domain was converted
// with. inUse are the target names (vda, sdb...) of the domain's disks now:
// the disk takes its spec-order name when free, else the first free name
// of its bus, as libvirt takes each target once (a volume unplugged before
// it frees its name, not the names after it).
func HotplugDisk(vmi *v1.VirtualMachineInstance, name string, src DiskSource, opts Options, inUse []string) (*libvirtxml.DomainDisk, error) {
	if vmi == nil {
		return nil, fmt.Errorf("domainxml: nil VirtualMachineInstance")
	}
	i := slices.IndexFunc(vmi.Spec.Volumes, func(v v1.Volume) bool { return v.Name == name })
	if i < 0 {
		return nil, fieldErrorf("spec.volumes", "no volume named %q", name)
	}
	if !v1.IsHotpluggable(&vmi.Spec.Volumes[i]) {
		return nil, fieldErrorf(fmt.Sprintf("spec.volumes[%d]", i), "volume %q is not a hotpluggable persistentVolumeClaim or dataVolume", name)
	}
	if !slices.ContainsFunc(vmi.Spec.Domain.Devices.Disks, func(d v1.Disk) bool { return d.Name == name }) {
		return nil, fieldErrorf("spec.domain.devices.disks", "no disk for the hotpluggable volume %q", name)
	}
	disks := make(map[string]DiskSource, len(opts.Disks)+1)
	maps.Copy(disks, opts.Disks)
	disks[name] = src
	opts.Disks = disks
	dom, err := Convert(vmi, opts)
	if err != nil {
		return nil, err
	}
	j := slices.IndexFunc(dom.Devices.Disks, func(d libvirtxml.DomainDisk) bool { return d.Alias != nil && d.Alias.Name == userAlias(name) })
	if j < 0 {
		return nil, fmt.Errorf("domainxml: the domain of VMI %s/%s has no disk %q", vmi.Namespace, vmi.Name, name)
	}
	disk := dom.Devices.Disks[j]
	if slices.Contains(inUse, disk.Target.Dev) {
		prefix := disk.Target.Dev[:2] // vd or sd
		for n := 0; ; n++ {
			if t := targetName(prefix, n); !slices.Contains(inUse, t) {
				disk.Target.Dev = t
				break
			}
		}
	}
	return &disk, nil
}
