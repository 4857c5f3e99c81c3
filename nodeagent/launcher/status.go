package launcher

import (
	"maps"
	"slices"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// Status returns the launcher's view of its domain.
func (l *Launcher) Status() client.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final
	}
	return l.statusLocked()
}

func (l *Launcher) statusLocked() client.Status {
	var mig *client.MigrationStatus
	if l.migration != nil {
		m := *l.migration
		mig = &m
	}
	var creds *client.AccessCredentialsStatus
	if l.accessCreds != nil {
		c := *l.accessCreds
		creds = &c
	}
	reason := l.last.Reason
	if l.startedPaused && l.last.State == hypervisor.StatePaused && reason == hypervisor.ReasonStartingUp {
		// Started paused as the VMI asked: the user's pause, as KubeVirt
		// reports it (libvirt says "starting up" until a resume).
		reason = hypervisor.ReasonUser
	}
	return client.Status{
		UID: l.cfg.UID, Domain: l.domain, Defined: l.domain != "", Started: l.started,
		State: l.last.State, Reason: reason, StopRequested: l.stopping, Terminated: l.terminated, Time: time.Now().UTC(),
		Migration: mig, Message: l.unavailableMessageLocked(), AccessCredentials: creds,
		CPUTopology: l.cpuTopology, Memory: l.memory.DeepCopy(),
		Timeline: l.timelineLocked(), HotplugVolumes: slices.Clone(l.volumes), MemoryDumps: slices.Clone(l.dumps), HotplugDiskDir: l.cfg.HotplugDiskDir,
		ClaimCapacities: maps.Clone(l.claimSizes),
	}
}

// timelineLocked is a copy of the start's steps, nil before the first.
func (l *Launcher) timelineLocked() *client.StartSteps {
	if l.steps.DisksPrepared.IsZero() {
		return nil
	}
	s := l.steps
	return &s
}
