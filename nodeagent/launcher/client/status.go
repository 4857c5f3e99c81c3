package client

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Status is what the launcher reports about its domain.
type Status struct {
	// UID of the VMI.
	UID string `json:"uid"`
	// Domain is the libvirt domain name once defined.
	Domain string `json:"domain,omitempty"`
	// Defined and Started say how far the domain got.
	Defined bool `json:"defined"`
	Started bool `json:"started"`
	// State and Reason are the domain's, as the hypervisor reports them.
	State  hypervisor.State  `json:"state,omitempty"`
	Reason hypervisor.Reason `json:"reason,omitempty"`
	// StopRequested: a shutdown or kill was asked for (or the launcher was
	// told to stop), so the domain's end was wanted.
	StopRequested bool `json:"stopRequested,omitempty"`
	// Final: the domain ended and the launcher is exiting or gone.
	Final bool `json:"final,omitempty"`
	// Terminated: the launcher itself was told to stop (SIGTERM, Run's
	// context ended) before a stop was asked for through its socket: the
	// kubelet killed the compute container because the pod was deleted or
	// evicted, or because the VMI's liveness probe failed.
	Terminated bool `json:"terminated,omitempty"`
	// Message explains a failure, when there was one.
	Message string `json:"message,omitempty"`
	// Migration is the last migration of the domain, from or to this
	// launcher. A final status with reason Migrated is the end of a source
	// launcher whose guest now runs on the target.
	Migration *MigrationStatus `json:"migration,omitempty"`
	// AccessCredentials is how the last sync of the VMI's guest-agent
	// access credentials went; nil while none ended (or the VMI has none).
	AccessCredentials *AccessCredentialsStatus `json:"accessCredentials,omitempty"`
	// CPUTopology is the CPU topology the guest has now, CPU hotplug
	// included (the VMI's status.currentCPUTopology); nil before the
	// domain is defined or when the VMI names no topology.
	CPUTopology *v1.CPUTopology `json:"cpuTopology,omitempty"`
	// Memory is the guest's memory (the VMI's status.memory: at boot,
	// requested, plugged) when it can grow (maxGuest); nil otherwise.
	Memory *v1.MemoryStatus `json:"memory,omitempty"`
	// Timeline is when the launcher's steps of the start ended; nil
	// before the disks are prepared.
	Timeline *StartSteps `json:"timeline,omitempty"`
	// HotplugVolumes are the VMI's hotpluggable volumes as the last sync
	// left them: attached to the guest, waiting for their mount, or failed.
	HotplugVolumes []HotplugVolume `json:"hotplugVolumes,omitempty"`
	// MemoryDumps are the memory dumps onto the VMI's memoryDump volumes.
	MemoryDumps []MemoryDump `json:"memoryDumps,omitempty"`
	// HotplugDiskDir is the launcher's Config.HotplugDiskDir, its symbolic
	// links resolved (/var/run is /run in most images): where the node
	// agent mounts hotplugged claims in the launcher's mount namespace, as
	// its mount table names them.
	HotplugDiskDir string `json:"hotplugDiskDir,omitempty"`
	// ClaimCapacities are, with Config.ExpandDisks, the capacities (bytes)
	// of the VMI's claims the last sync grew the disks to fit, by volume;
	// nil without ExpandDisks. ExpandPending compares them with the VMI's.
	ClaimCapacities map[string]int64 `json:"claimCapacities,omitempty"`
	// Time is when the status was taken.
	Time time.Time `json:"time"`
}

// StartSteps are when the launcher's steps of a start ended, for the VMI's
// start timeline (v1.StartTimelineAnnotation); zero until then.
type StartSteps struct {
	DisksPrepared time.Time `json:"disksPrepared,omitzero"`
	DomainDefined time.Time `json:"domainDefined,omitzero"`
	DomainStarted time.Time `json:"domainStarted,omitzero"`
}

// Succeeded reports whether a final status is a clean end: the guest shut
// itself down, or it was stopped on request.
func (s Status) Succeeded() bool {
	if s.State != hypervisor.StateShutoff {
		return false
	}
	switch s.Reason {
	case hypervisor.ReasonShutdown:
		return true
	case hypervisor.ReasonDestroyed:
		return s.StopRequested
	}
	return false
}

// Names of the files in a launcher's socket directory.
const (
	// SocketFile is the command socket.
	SocketFile = "launcher.sock"
	// FinalFile holds the final status (see ReadFinalDir).
	FinalFile = "final.json"
)

// SocketDir is the directory of the command socket of the VMI with the
// given UID: <shareDir>/sockets/<uid>.
func SocketDir(shareDir, uid string) string {
	return filepath.Join(shareDir, "sockets", uid)
}

// SocketPath is the command socket of the VMI with the given UID.
func SocketPath(shareDir, uid string) string {
	return filepath.Join(SocketDir(shareDir, uid), SocketFile)
}

// FinalPath is where a launcher leaves the final status of its domain.
func FinalPath(shareDir, uid string) string {
	return filepath.Join(SocketDir(shareDir, uid), FinalFile)
}

// ReadFinal reads the final status a launcher left; an error wrapping
// os.ErrNotExist when it left none.
func ReadFinal(shareDir, uid string) (Status, error) {
	return ReadFinalDir(SocketDir(shareDir, uid))
}

// ReadFinalDir reads the final status a launcher left in its socket
// directory dir, wherever that directory is seen (a kubelet pod's volume,
// for instance); an error wrapping os.ErrNotExist when it left none.
func ReadFinalDir(dir string) (Status, error) {
	var s Status
	path := filepath.Join(dir, FinalFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("final status %s: %w", path, err)
	}
	return s, nil
}
