package hypervisor

import "strings"

// DomainStats are the statistics of an active (running or paused) domain,
// as libvirt's virConnectGetAllDomainStats reports them: what KubeVirt's
// virt-handler turns into its kubevirt_vmi_* metrics. Counters count from
// the start of the domain's QEMU process. A nil value is one the
// hypervisor did not report: the guest's own memory statistics need a
// balloon device with a driver in the guest, vCPU wait and delay times
// need a host kernel that accounts them.
type DomainStats struct {
	CPU        CPUStats         `json:"cpu"`
	Memory     MemoryStats      `json:"memory"`
	VCPUs      []VCPUStats      `json:"vcpus,omitempty"`
	Interfaces []InterfaceStats `json:"interfaces,omitempty"`
	Disks      []DiskStats      `json:"disks,omitempty"`
}

// CPUStats is the CPU time of the domain's QEMU process in nanoseconds:
// all of it (vCPUs and QEMU's own threads), in user mode, in kernel mode.
type CPUStats struct {
	TimeNs   *uint64 `json:"timeNs,omitempty"`
	UserNs   *uint64 `json:"userNs,omitempty"`
	SystemNs *uint64 `json:"systemNs,omitempty"`
}

// MemoryStats are libvirt's balloon statistics, converted to bytes.
type MemoryStats struct {
	// DomainBytes is the memory the domain was defined with (libvirt's
	// balloon.maximum, the <memory> of the domain XML).
	DomainBytes *uint64 `json:"domainBytes,omitempty"`
	// ActualBalloonBytes is the memory the balloon leaves the guest
	// (balloon.current).
	ActualBalloonBytes *uint64 `json:"actualBalloonBytes,omitempty"`
	// ResidentBytes is the resident set size of the QEMU process.
	ResidentBytes *uint64 `json:"residentBytes,omitempty"`
	// The guest's view, from the balloon driver in the guest: memory the
	// guest's OS can use (AvailableBytes), could reclaim without swapping
	// (UsableBytes, /proc/meminfo's MemAvailable), leaves completely
	// unused (UnusedBytes) and uses as reclaimable caches (CachedBytes),
	// and the data it swapped in and out.
	AvailableBytes *uint64 `json:"availableBytes,omitempty"`
	UsableBytes    *uint64 `json:"usableBytes,omitempty"`
	UnusedBytes    *uint64 `json:"unusedBytes,omitempty"`
	CachedBytes    *uint64 `json:"cachedBytes,omitempty"`
	SwapInBytes    *uint64 `json:"swapInBytes,omitempty"`
	SwapOutBytes   *uint64 `json:"swapOutBytes,omitempty"`
	// MajorFaults and MinorFaults count the guest's page faults that did
	// and did not need disk I/O.
	MajorFaults *uint64 `json:"majorFaults,omitempty"`
	MinorFaults *uint64 `json:"minorFaults,omitempty"`
}

// VCPUState is the state of a virtual CPU, named as KubeVirt's metrics
// name it.
type VCPUState string

// vCPU states.
const (
	VCPUOffline VCPUState = "offline"
	VCPURunning VCPUState = "running"
	VCPUBlocked VCPUState = "blocked"
	VCPUUnknown VCPUState = "unknown"
)

// VCPUStats are one virtual CPU's: its state, the host CPU time it ran,
// waited for I/O and waited to be scheduled, in nanoseconds.
type VCPUStats struct {
	ID      int       `json:"id"`
	State   VCPUState `json:"state"`
	TimeNs  *uint64   `json:"timeNs,omitempty"`
	WaitNs  *uint64   `json:"waitNs,omitempty"`
	DelayNs *uint64   `json:"delayNs,omitempty"`
}

// InterfaceStats are one network interface's traffic as the host side of
// the interface (the tap device) counts it: Rx is what the guest received.
type InterfaceStats struct {
	// Name is the host's device, such as tap0.
	Name string `json:"name"`
	// Alias is the name of the VMI's interface, from the domain's user
	// alias (ua-<name>); empty for an interface without one.
	Alias     string  `json:"alias,omitempty"`
	RxBytes   *uint64 `json:"rxBytes,omitempty"`
	RxPackets *uint64 `json:"rxPackets,omitempty"`
	RxErrors  *uint64 `json:"rxErrors,omitempty"`
	RxDrops   *uint64 `json:"rxDrops,omitempty"`
	TxBytes   *uint64 `json:"txBytes,omitempty"`
	TxPackets *uint64 `json:"txPackets,omitempty"`
	TxErrors  *uint64 `json:"txErrors,omitempty"`
	TxDrops   *uint64 `json:"txDrops,omitempty"`
}

// DiskStats are one disk's I/O: requests, bytes and the time they took
// (nanoseconds), read, written and flushed.
type DiskStats struct {
	// Name is the disk's target device in the guest, such as vda.
	Name string `json:"name"`
	// Alias is the name of the VMI's disk, from the domain's user alias
	// (ua-<name>); empty for a disk without one.
	Alias         string  `json:"alias,omitempty"`
	ReadRequests  *uint64 `json:"readRequests,omitempty"`
	ReadBytes     *uint64 `json:"readBytes,omitempty"`
	ReadTimeNs    *uint64 `json:"readTimeNs,omitempty"`
	WriteRequests *uint64 `json:"writeRequests,omitempty"`
	WriteBytes    *uint64 `json:"writeBytes,omitempty"`
	WriteTimeNs   *uint64 `json:"writeTimeNs,omitempty"`
	FlushRequests *uint64 `json:"flushRequests,omitempty"`
	FlushTimeNs   *uint64 `json:"flushTimeNs,omitempty"`
}

// UserAliasPrefix starts the libvirt alias domainxml gives the devices
// named in the VMI (ua-<name>).
const UserAliasPrefix = "ua-"

// DeviceName is the VMI's name of a device with the libvirt alias alias:
// alias without the user alias prefix, or "" for a device the VMI did not
// name.
func DeviceName(alias string) string {
	name, ok := strings.CutPrefix(alias, UserAliasPrefix)
	if !ok {
		return ""
	}
	return name
}
