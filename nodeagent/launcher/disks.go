package launcher

import (
	"context"
	"fmt"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/diskimage"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/vmstate"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's defaults for the disk.img the launcher creates in an empty
// Filesystem claim (the KubeVirt CR's
// developerConfiguration.pvcTolerateLessSpaceUpToPercent and
// minimumReservePVCBytes).
const (
	DefaultLessPVCSpaceToleration = diskimage.DefaultLessPVCSpaceToleration
	DefaultMinimumPVCReserveBytes = diskimage.DefaultMinimumPVCReserveBytes
)

// prepare readies every volume of vmi that the launcher provides (package
// diskimage), the host CPUs and NUMA nodes the guest is pinned to, and its
// persistent state, and returns the domainxml options pointing at them,
// with the directories it created (removed when the launcher ends, also on
// error).
func (l *Launcher) prepare(ctx context.Context, vmi *v1.VirtualMachineInstance) (domainxml.Options, []string, error) {
	var opts domainxml.Options
	cpus, err := l.dedicatedCPUs(vmi)
	if err != nil {
		return opts, nil, err
	}
	opts.CPUSet = cpus
	if c := vmi.Spec.Domain.CPU; c != nil && c.NUMA != nil && c.NUMA.GuestMappingPassthrough != nil {
		if opts.HostNUMANodes, err = HostNUMANodes(); err != nil {
			return opts, nil, fmt.Errorf("spec.domain.cpu.numa.guestMappingPassthrough: %w", err)
		}
	}
	created, err := l.disks().Prepare(ctx, vmi, &opts)
	if err != nil {
		return opts, created, err
	}
	state := vmstate.Dirs{VMStateDir: l.cfg.VMStateDir, SwtpmStorageDir: l.cfg.SwtpmStorageDir}
	if err := state.Persist(vmi, &opts); err != nil {
		return opts, created, err
	}
	return opts, created, nil
}

// disks is where the launcher's disks are made from and of.
func (l *Launcher) disks() diskimage.Config {
	return diskimage.Config{
		Key:                    l.key(),
		EphemeralDiskDir:       l.cfg.EphemeralDiskDir,
		PrivateDir:             l.cfg.PrivateDir,
		ContainerDiskDir:       l.cfg.ContainerDiskDir,
		DeviceDir:              l.cfg.DeviceDir,
		QEMUImg:                l.cfg.QEMUImg,
		LessPVCSpaceToleration: l.cfg.LessPVCSpaceToleration,
		MinimumPVCReserveBytes: l.cfg.MinimumPVCReserveBytes,
		ExpandDisks:            l.cfg.ExpandDisks,
	}
}
