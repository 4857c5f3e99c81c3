package client

import (
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// AccessCredentialsStatus is how the last attempt to put the VMI's
// guest-agent access credentials into the guest went.
type AccessCredentialsStatus struct {
	// Succeeded: every key and password is in the guest as the Secrets say.
	Succeeded bool `json:"succeeded"`
	// Message says what failed.
	Message string `json:"message,omitempty"`
}

// ErrNotReady: a file the domain needs from the launcher pod (a container
// disk's image, a kernel-boot file, which the pod's containers copy in) is
// not there yet. The node agent waits for it instead of reporting a failed
// sync (for a while: see nodeagent's notReadyGrace).
var ErrNotReady = errors.New("not ready: the launcher pod's containers have not provided it yet")

// ExpandPending reports whether a claim of vmi has grown beyond the
// capacity st's launcher last grew its disk for: the node agent then syncs
// the launcher, which grows it. False for a launcher without ExpandDisks.
func ExpandPending(vmi *v1.VirtualMachineInstance, st *Status) bool {
	if st.ClaimCapacities == nil {
		return false
	}
	for i := range vmi.Status.VolumeStatus {
		info := vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo
		if info == nil {
			continue
		}
		if c, ok := info.Capacity[corev1.ResourceStorage]; ok && c.Value() > st.ClaimCapacities[vmi.Status.VolumeStatus[i].Name] {
			return true
		}
	}
	return false
}

// FreezeTimeout bounds Freeze: the guest agent syncs the guest's file
// systems before it freezes them, which takes longer than a query.
const FreezeTimeout = 30 * time.Second

// DefaultGuestAgentTimeout bounds one guest agent command unless
// Config.GuestAgentTimeout says otherwise: an agent that has not answered by
// then is taken as not connected.
const DefaultGuestAgentTimeout = 5 * time.Second

// IsGuestAgentCommand reports whether the launcher runs the QEMU guest agent
// command for its clients. Only commands that read the guest's state and
// take no arguments are allowed: the command socket must not become a way to
// run programs in the guest, write its files or change its users.
func IsGuestAgentCommand(command string) bool {
	switch command {
	case "guest-ping", "guest-info", "guest-get-osinfo", "guest-get-host-name",
		"guest-get-timezone", "guest-get-users", "guest-get-fsinfo",
		"guest-network-get-interfaces", "guest-fsfreeze-status":
		return true
	}
	return false
}

// NetworkInterface is how the node agent wired one of the VMI's interfaces
// in the launcher pod's network namespace, and what the launcher does with
// it: use MAC for the guest's NIC and answer the guest's DHCP with DHCP.
type NetworkInterface struct {
	// Name is the interface's name in spec.domain.devices.interfaces.
	Name string `json:"name"`
	// MAC is the guest NIC's address when the spec gives none and the
	// binding needs a known one (bridge: the pod's own); empty otherwise.
	MAC string `json:"mac,omitempty"`
	// DHCP is what the launcher's DHCP server hands the guest on this
	// interface; the launcher adds the pod's name servers and search
	// domains when it names none.
	DHCP *dhcp.Lease `json:"dhcp,omitempty"`
	// DHCPv6 is what the launcher's DHCPv6 server gives the guest on this
	// interface (nil: no IPv6; the node agent sends the router
	// advertisements that send the guest to it); the launcher adds the
	// pod's IPv6 name servers and search domains when it names none.
	DHCPv6 *dhcp.Lease6 `json:"dhcpv6,omitempty"`
	// Passt is set for the interface with the passtBinding: the launcher
	// runs passt for it, which answers the guest's DHCP itself.
	Passt *PasstConfig `json:"passt,omitempty"`
}

// PasstConfig is how the launcher runs passt for the passtBinding.
type PasstConfig struct {
	// Ports are passt's port-forwarding arguments (network.PasstArgs).
	Ports []string `json:"ports"`
}

// ProbeKind names one of a VMI's probes.
type ProbeKind string

// The probes a launcher runs for the kubelet (see launcher.Launcher.Probe).
const (
	ProbeReadiness ProbeKind = "readiness"
	ProbeLiveness  ProbeKind = "liveness"
)

// ProbeResult is the outcome of one run of a probe.
type ProbeResult struct {
	// Success: the guest passed the check (or it was skipped, see Message).
	Success bool `json:"success"`
	// ExitCode of an exec probe's command in the guest, when it ran.
	ExitCode int `json:"exitCode"`
	// Output is what an exec probe's command wrote (standard output, then
	// standard error), cut at maxProbeOutput bytes.
	Output string `json:"output,omitempty"`
	// Message says why the probe failed or was skipped.
	Message string `json:"message,omitempty"`
}

// DefaultHotplugDiskDir is Config.HotplugDiskDir's default, where
// podtemplate's launcher pod has the directory hotplugged claims are
// mounted in (podtemplate.DefaultHotplugDiskDir).
const DefaultHotplugDiskDir = "/var/run/kubevirt/hotplug-disks"

// HotplugVolume is a hotpluggable volume of the VMI as the launcher sees
// it.
type HotplugVolume struct {
	// Name is the volume's name.
	Name string `json:"name"`
	// Target is the guest's device name (sda, vdb...) once attached.
	Target string `json:"target,omitempty"`
	// Attached: the guest has the disk.
	Attached bool `json:"attached,omitempty"`
	// Detaching: the volume left the spec and the guest was asked to
	// release the disk, but still has it.
	Detaching bool `json:"detaching,omitempty"`
	// Message says why the volume is not attached: its claim is not
	// mounted into the pod yet, or the attach failed.
	Message string `json:"message,omitempty"`
}

// MemoryDump is how the memory dump onto a memoryDump volume stands
// (KubeVirt's memory dump): started once its claim is mounted, written to
// <HotplugDiskDir>/<volume>/<TargetFileName>.
type MemoryDump struct {
	// Volume is the memoryDump volume's name.
	Volume string `json:"volume"`
	// TargetFileName is the dump's file name on the claim.
	TargetFileName string `json:"targetFileName"`
	// Start and End are when the dump began and ended (End zero while it
	// runs).
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// Error is why the dump failed; empty when it succeeded or runs.
	Error string `json:"error,omitempty"`
}

// HotplugPending reports whether the launcher's hotplugged volumes and
// memory dumps (st's) differ from the hotpluggable and memoryDump volumes
// of vmi's spec: one to attach, one to detach, a dump to start; the node
// agent then syncs the launcher.
func HotplugPending(vmi *v1.VirtualMachineInstance, st *Status) bool {
	have := map[string]HotplugVolume{}
	for _, v := range st.HotplugVolumes {
		have[v.Name] = v
	}
	n, dumps := 0, 0
	for i := range vmi.Spec.Volumes {
		vol := &vmi.Spec.Volumes[i]
		if vol.MemoryDump != nil {
			dumps++
			if !slices.ContainsFunc(st.MemoryDumps, func(d MemoryDump) bool { return d.Volume == vol.Name }) {
				return true
			}
			continue
		}
		if !v1.IsHotpluggable(vol) || !hasDisk(vmi, vol.Name) {
			continue
		}
		n++
		if v, ok := have[vol.Name]; !ok || !v.Attached {
			return true
		}
	}
	return n != len(st.HotplugVolumes) || dumps != len(st.MemoryDumps)
}

// hasDisk reports whether a disk of vmi uses the volume name.
func hasDisk(vmi *v1.VirtualMachineInstance, name string) bool {
	for i := range vmi.Spec.Domain.Devices.Disks {
		if vmi.Spec.Domain.Devices.Disks[i].Name == name {
			return true
		}
	}
	return false
}
