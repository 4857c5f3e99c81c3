package v1

import "k8s.io/apimachinery/pkg/api/resource"

// KubeVirt's hotplug headroom (its defaults.setupHotplug): under the
// LiveUpdate rollout strategy a VMI may grow, while it runs, to
// maxHotplugRatio (4) times the CPU sockets and guest memory it starts
// with.

const (
	// DefaultMaxHotplugRatio is KubeVirt's liveUpdateConfiguration
	// maxHotplugRatio when unset.
	DefaultMaxHotplugRatio = 4
	// maxHotplugVCPUs bounds the vCPUs maxSockets may give, as KubeVirt's.
	maxHotplugVCPUs = 512
	// MinHotplugGuestMemory is the least guest memory memory hotplug
	// takes (KubeVirt's: the guest kernel's structures and the PCI hole).
	MinHotplugGuestMemory = 1 << 30
)

// MemoryHotplugBlock is the virtio-mem block, the alignment of the guest
// memory and maxGuest of a guest with memory hotplug: 2Mi, the size of a
// transparent huge page, or 1Gi with 1Gi huge pages (KubeVirt's).
func MemoryHotplugBlock(mem *Memory) int64 {
	if mem != nil && mem.Hugepages != nil && mem.Hugepages.PageSize == "1Gi" {
		return 1 << 30
	}
	return 2 << 20
}

// liveUpdate reports whether cfg's rollout strategy is LiveUpdate (the
// default).
func liveUpdate(cfg *KubeVirtConfiguration) bool {
	return cfg == nil || cfg.VMRolloutStrategy == nil || *cfg.VMRolloutStrategy == VMRolloutStrategyLiveUpdate
}

// SetHotplugDefaults gives an x86_64 VMI its hotplug headroom under
// LiveUpdate, as KubeVirt does: maxSockets, for a VMI that names its CPU
// sockets, is liveUpdateConfiguration.maxCpuSockets, else sockets ×
// maxHotplugRatio (at most 512 vCPUs); maxGuest is
// liveUpdateConfiguration.maxGuest, else guest memory × maxHotplugRatio,
// for a guest memory hotplug can grow (at least 1Gi, aligned to its block).
// Dedicated CPUs, realtime, guest NUMA passthrough and launch security get
// none, as the guest's vCPUs and memory are then pinned or encrypted.
// vmkit's controllers apply it, with SetClusterDefaults, to the VMIs they
// start; a cfg of nil is KubeVirt's defaults.
func SetHotplugDefaults(spec *VirtualMachineInstanceSpec, cfg *KubeVirtConfiguration) {
	d := &spec.Domain
	if !liveUpdate(cfg) || spec.Architecture != "" && spec.Architecture != "amd64" || d.LaunchSecurity != nil {
		return
	}
	if cpu := d.CPU; cpu != nil && (cpu.DedicatedCPUPlacement || cpu.Realtime != nil || cpu.NUMA != nil && cpu.NUMA.GuestMappingPassthrough != nil) {
		return
	}
	ratio := uint32(DefaultMaxHotplugRatio)
	var lu LiveUpdateConfiguration
	if cfg != nil && cfg.LiveUpdateConfiguration != nil {
		lu = *cfg.LiveUpdateConfiguration
		if lu.MaxHotplugRatio != 0 {
			ratio = lu.MaxHotplugRatio
		}
	}
	if cpu := d.CPU; cpu != nil && cpu.Sockets != 0 && cpu.MaxSockets == 0 {
		perSocket := max(cpu.Cores, 1) * max(cpu.Threads, 1)
		maxSockets := cpu.Sockets * ratio
		if lu.MaxCPUSockets != nil && *lu.MaxCPUSockets != 0 {
			maxSockets = max(*lu.MaxCPUSockets, cpu.Sockets)
		}
		maxSockets = min(maxSockets, max(maxHotplugVCPUs/perSocket, cpu.Sockets))
		if uint64(maxSockets)*uint64(perSocket) <= maxHotplugVCPUs {
			cpu.MaxSockets = maxSockets
		}
	}
	if mem := d.Memory; mem != nil && mem.Guest != nil && mem.MaxGuest == nil {
		block, guest := MemoryHotplugBlock(mem), mem.Guest.Value()
		if guest < MinHotplugGuestMemory || guest%block != 0 {
			return
		}
		maxGuest := resource.NewQuantity(guest*int64(ratio), resource.BinarySI)
		if lu.MaxGuest != nil {
			maxGuest = lu.MaxGuest
		}
		if maxGuest.Value() >= guest && maxGuest.Value()%block == 0 {
			m := maxGuest.DeepCopy()
			mem.MaxGuest = &m
		}
	}
}

// Volume hotplug: a persistentVolumeClaim or dataVolume volume marked
// hotpluggable is attached to the running guest after it starts (and
// detached when it leaves the spec), without a restart. VolumeStatus.Phase
// of such a volume takes KubeVirt's values below.
const (
	// VolumePending: the volume's claim is not bound yet.
	VolumePending = "Pending"
	// VolumeBound: the claim is bound; the node has not mounted it yet.
	VolumeBound = "Bound"
	// HotplugVolumeAttachedToNode: the volume is attached to the node.
	HotplugVolumeAttachedToNode = "AttachedToNode"
	// HotplugVolumeMounted: the node agent mounted the volume into the
	// launcher pod.
	HotplugVolumeMounted = "MountedToPod"
	// VolumeReady: the guest has the disk.
	VolumeReady = "Ready"
	// HotplugVolumeDetaching: the volume is being detached from the guest.
	HotplugVolumeDetaching = "Detaching"
	// HotplugVolumeUnMounted: the volume left the launcher pod.
	HotplugVolumeUnMounted = "UnMountedFromPod"
)

// IsHotpluggable reports whether vol is a claim or data volume marked
// hotpluggable.
func IsHotpluggable(vol *Volume) bool {
	return vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.Hotpluggable ||
		vol.DataVolume != nil && vol.DataVolume.Hotpluggable
}

// ClaimName is the claim or DataVolume the source names, or "".
func (s *HotplugVolumeSource) ClaimName() string {
	switch {
	case s == nil:
	case s.PersistentVolumeClaim != nil:
		return s.PersistentVolumeClaim.ClaimName
	case s.DataVolume != nil:
		return s.DataVolume.Name
	}
	return ""
}

// ApplyVolumeRequest changes spec as req asks, as KubeVirt does: an added
// volume, marked hotpluggable, joins spec.volumes and its disk (named
// after it, on bus scsi when it names none, virtctl's default) joins
// spec.domain.devices.disks; a removed volume (by its name or its claim's)
// and its disk leave them.
func ApplyVolumeRequest(spec *VirtualMachineInstanceSpec, req *VirtualMachineVolumeRequest) {
	if add := req.AddVolumeOptions; add != nil {
		vol := Volume{Name: add.Name}
		if src := add.VolumeSource; src != nil {
			switch {
			case src.PersistentVolumeClaim != nil:
				pvc := *src.PersistentVolumeClaim
				pvc.Hotpluggable = true
				vol.PersistentVolumeClaim = &pvc
			case src.DataVolume != nil:
				dv := *src.DataVolume
				dv.Hotpluggable = true
				vol.DataVolume = &dv
			}
		}
		spec.Volumes = append(spec.Volumes, vol)
		if add.Disk != nil {
			disk := *add.Disk.DeepCopy()
			disk.Name = add.Name
			if disk.Disk == nil && disk.LUN == nil && disk.CDRom == nil {
				disk.Disk = &DiskTarget{}
			}
			if disk.Disk != nil && disk.Disk.Bus == "" {
				disk.Disk.Bus = DiskBusSCSI
			}
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, disk)
		}
		return
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		removed := ""
		vols := spec.Volumes[:0:0]
		for _, vol := range spec.Volumes {
			src := HotplugVolumeSource{PersistentVolumeClaim: vol.PersistentVolumeClaim, DataVolume: vol.DataVolume}
			if removed == "" && (vol.Name == rm.Name || src.ClaimName() == rm.Name) {
				removed = vol.Name
				continue
			}
			vols = append(vols, vol)
		}
		spec.Volumes = vols
		disks := spec.Domain.Devices.Disks[:0:0]
		for _, d := range spec.Domain.Devices.Disks {
			if d.Name != removed {
				disks = append(disks, d)
			}
		}
		spec.Domain.Devices.Disks = disks
	}
}

// KubeVirt's memory dump (virtctl memory-dump get): the VM's
// status.memoryDumpRequest goes through these phases while a memoryDump
// volume of the claim is hot-plugged into its instance, the guest's memory
// is written to a file on it, and the volume is unplugged again.
const (
	// MemoryDumpAssociating: the request is recorded; the claim is being
	// added to the instance.
	MemoryDumpAssociating MemoryDumpPhase = "Associating"
	// MemoryDumpInProgress: the claim is the instance's; the dump runs.
	MemoryDumpInProgress MemoryDumpPhase = "InProgress"
	// MemoryDumpUnmounting: the dump is written; the claim is leaving the
	// instance.
	MemoryDumpUnmounting MemoryDumpPhase = "Unmounting"
	// MemoryDumpCompleted: the dump is on the claim (fileName).
	MemoryDumpCompleted MemoryDumpPhase = "Completed"
	// MemoryDumpDissociating: removememorydump asked to forget the claim.
	MemoryDumpDissociating MemoryDumpPhase = "Dissociating"
	// MemoryDumpFailed: the dump failed (message).
	MemoryDumpFailed MemoryDumpPhase = "Failed"
)

// Phases of a memory dump volume in status.volumeStatus.
const (
	// MemoryDumpVolumeInProgress: the guest's memory is being written.
	MemoryDumpVolumeInProgress = "MemoryDumpInProgress"
	// MemoryDumpVolumeCompleted: the dump is written.
	MemoryDumpVolumeCompleted = "MemoryDumpCompleted"
	// MemoryDumpVolumeFailed: the dump failed.
	MemoryDumpVolumeFailed = "MemoryDumpFailed"
)

// HotplugClaim is the claim a volume attached to a running instance takes:
// a hotpluggable persistentVolumeClaim or dataVolume, or a memoryDump
// volume; "" for any other volume.
func HotplugClaim(vol *Volume) string {
	switch {
	case vol.MemoryDump != nil:
		return vol.MemoryDump.ClaimName
	case vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.Hotpluggable:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.DataVolume != nil && vol.DataVolume.Hotpluggable:
		return vol.DataVolume.Name
	}
	return ""
}
