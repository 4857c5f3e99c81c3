package podtemplate

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const mi = 1 << 20

// The memory overhead of a launcher pod: what runs beside the guest's RAM.
// The process sizes are KubeVirt's measurements (RSS of each process as seen
// in `ps`, rounded up); the per-disk and per-interface terms are vmkit's
// estimates. docs/podtemplate.md explains every term.
const (
	launcherMonitorOverhead = 25 * mi  // virt-launcher-monitor
	launcherOverhead        = 100 * mi // virt-launcher
	virtlogdOverhead        = 25 * mi  // virtlogd
	virtqemudOverhead       = 40 * mi  // virtqemud
	qemuOverhead            = 30 * mi  // QEMU itself, without guest RAM and page tables
	fixedOverhead           = launcherMonitorOverhead + launcherOverhead + virtlogdOverhead + virtqemudOverhead + qemuOverhead

	pageTableDivisor     = 512      // one byte of page tables per 512 bytes of guest RAM
	perVCPUOverhead      = 8 * mi   // vCPU thread stacks and KVM per-vCPU state
	ioThreadOverhead     = 8 * mi   // the I/O thread
	videoOverhead        = 32 * mi  // video RAM of the VGA device behind VNC
	perDiskOverhead      = 4 * mi   // vmkit: qcow2 L2/refcount caches, virtqueues and bounce buffers
	perInterfaceOverhead = 2 * mi   // vmkit: virtio-net rings, tap and vhost buffers
	arm64Overhead        = 128 * mi // the two 64Mi UEFI pflash devices on arm64
	tpmOverhead          = 53 * mi  // swtpm, libvirt's TPM emulator (KubeVirt: VSZ 53808 KiB)
	dedicatedCPUOverhead = 100 * mi // headroom so a Guaranteed pod is not OOM-killed at its limit
	// passt, of the passtBinding: vmkit measured an RSS of 21 MiB
	// forwarding listed ports; forwarding every port (no ports listed)
	// holds a socket per port, for which KubeVirt reserves 250Mi.
	passtOverhead         = 32 * mi
	passtAllPortsOverhead = 250 * mi
	// tcgCacheOverhead is QEMU's translation cache when the guest is
	// emulated (Config.EmulationAllowed: the pod gets no /dev/kvm), the
	// size domainxml.TCGTranslationCacheMiB bounds it to. The cache grows
	// as new guest code runs; vmkit's 30-minute soak of a guest filling
	// its memory used 236 MiB beyond the guest with it.
	tcgCacheOverhead = 128 * mi
)

// Small fixed resources of the helper containers (container-disk-binary,
// volume<name>-init, volume<name>), KubeVirt's values.
const (
	helperCPURequestMilli   = 10
	helperCPULimitMilli     = 100
	helperMemoryRequest     = 1_000_000  // 1M
	helperMemoryLimit       = 40_000_000 // 40M
	ephemeralStorageRequest = 50_000_000 // 50M, scratch space of the launcher and of each disk sidecar
)

// overheadInput is what the memory overhead depends on.
type overheadInput struct {
	guestMemory int64
	vcpus       int64
	disks       int
	interfaces  int
	graphics    bool
	dedicated   bool
	arm64       bool
	tpm         bool
	passt       passtUse
	tcg         bool
}

// passtUse is whether the pod network's interface uses the passtBinding,
// and whether passt then forwards every port.
type passtUse struct{ on, allPorts bool }

// passtOf reads passtUse from an interface list.
func passtOf(devices *v1.Devices) passtUse {
	for i := range devices.Interfaces {
		if iface := &devices.Interfaces[i]; iface.PasstBinding != nil {
			return passtUse{on: true, allPorts: len(iface.Ports) == 0}
		}
	}
	return passtUse{}
}

// memoryOverhead returns the bytes a launcher pod needs beyond the guest's
// memory, rounded up to a whole MiB:
//
//	base     = 220Mi (launcher, libvirt and QEMU processes)
//	         + guest memory / 512 (page tables)
//	         + 8Mi × vCPUs + 8Mi (I/O thread)
//	         + 4Mi × disks + 2Mi × interfaces
//	         + 32Mi with a graphics device + 128Mi on arm64 + 53Mi with a TPM
//	         + 32Mi with passt (250Mi forwarding every port)
//	         + 128Mi under emulation (QEMU's translation cache)
//	overhead = base × policy.Ratio + 100Mi with dedicated CPUs + policy.Extra
func memoryOverhead(in overheadInput, policy OverheadPolicy) int64 {
	base := int64(fixedOverhead) +
		in.guestMemory/pageTableDivisor +
		perVCPUOverhead*in.vcpus + ioThreadOverhead +
		perDiskOverhead*int64(in.disks) + perInterfaceOverhead*int64(in.interfaces)
	if in.graphics {
		base += videoOverhead
	}
	if in.arm64 {
		base += arm64Overhead
	}
	if in.tpm {
		base += tpmOverhead
	}
	switch {
	case in.passt.allPorts:
		base += passtAllPortsOverhead
	case in.passt.on:
		base += passtOverhead
	}
	if in.tcg {
		base += tcgCacheOverhead
	}
	if policy.Ratio > 1 {
		base = int64(math.Ceil(float64(base) * policy.Ratio))
	}
	if in.dedicated {
		base += dedicatedCPUOverhead
	}
	base += policy.Extra.Value()
	return (base + mi - 1) / mi * mi
}

// hasTPM reports whether devices give the guest a TPM: tpm set and not
// enabled: false.
func hasTPM(devices *v1.Devices) bool {
	return devices.TPM != nil && (devices.TPM.Enabled == nil || *devices.TPM.Enabled)
}

// overheadInputOf reads the overhead's inputs from validated facts, for a
// guest emulated or not.
func overheadInputOf(f *guestFacts, arch string, emulated bool) overheadInput {
	return overheadInput{
		guestMemory: f.guestMemory,
		vcpus:       f.vcpus,
		disks:       f.disks,
		interfaces:  f.interfaces,
		graphics:    f.graphics,
		dedicated:   f.dedicated,
		arm64:       arch == "arm64",
		tpm:         f.tpm,
		passt:       f.passt,
		tcg:         emulated,
	}
}

// computeResources returns the compute container's requests and limits:
//
//   - CPU: the VMI's request, else its limit, else vCPUs / CPUAllocationRatio;
//     with dedicated CPUs, requests = limits = vCPUs (+1 for an isolated
//     emulator thread);
//   - memory: the requested memory (else the guest memory) + overhead (no overhead
//     when overcommitGuestOverhead is set); the limit, when the VMI sets one,
//     is its limit + overhead; with dedicated CPUs the limit equals the
//     request; with huge pages the guest memory is requested as
//     hugepages-<size> and memory covers only the overhead;
//   - ephemeral-storage: 50M more than the VMI asks;
//   - one devices.kubevirt.io/kvm (unless emulation is allowed; the node
//     agent's device plugin gives /dev/vhost-net with it where the node has
//     it) and tun (when a NIC is a tap device); never vhost-net, which a
//     node without the vhost_net module does not have (QEMU's userspace
//     virtio-net serves there);
//   - any other resource the VMI names, unchanged.
func computeResources(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, cfg *Config, overhead int64) (corev1.ResourceRequirements, error) {
	vmiRes := &spec.Domain.Resources
	requests := make(corev1.ResourceList, len(vmiRes.Requests)+6)
	limits := make(corev1.ResourceList, len(vmiRes.Limits)+5)
	for name, q := range vmiRes.Requests {
		requests[name] = q.DeepCopy()
	}
	for name, q := range vmiRes.Limits {
		limits[name] = q.DeepCopy()
	}

	if err := setCPU(f, vmiRes, cfg.CPUAllocationRatio, requests, limits); err != nil {
		return corev1.ResourceRequirements{}, err
	}
	if err := setMemory(f, vmiRes, overhead, requests, limits); err != nil {
		return corev1.ResourceRequirements{}, err
	}

	storage := requests[corev1.ResourceEphemeralStorage]
	storage.Add(*resource.NewQuantity(ephemeralStorageRequest, resource.DecimalSI))
	requests[corev1.ResourceEphemeralStorage] = storage
	if l, ok := limits[corev1.ResourceEphemeralStorage]; ok {
		l.Add(*resource.NewQuantity(ephemeralStorageRequest, resource.DecimalSI))
		limits[corev1.ResourceEphemeralStorage] = l
	}

	one := *resource.NewQuantity(1, resource.DecimalSI)
	device := func(name corev1.ResourceName) {
		requests[name] = one
		limits[name] = one
	}
	if !cfg.EmulationAllowed {
		// With /dev/vhost-net where the node has it (vmkit's device
		// plugin); KubeVirt's pods ask for devices.kubevirt.io/vhost-net
		// as well, and stay Pending on a node without the vhost_net
		// module.
		device(v1.KVMDevice)
	}
	if f.tap {
		device(v1.TunDevice)
	}
	if len(limits) == 0 {
		limits = nil
	}
	return corev1.ResourceRequirements{Requests: requests, Limits: limits}, nil
}

func setCPU(f *guestFacts, vmiRes *v1.ResourceRequirements, ratio int, requests, limits corev1.ResourceList) error {
	if f.dedicated {
		n := f.vcpus
		if f.emulatorThread {
			n++
		}
		if r, ok := vmiRes.Requests[corev1.ResourceCPU]; ok && r.CmpInt64(n) > 0 {
			return f.ref.errorf("spec.domain.resources.requests.cpu", "%s is more than the %d dedicated CPUs the guest gets", r.String(), n)
		}
		q := *resource.NewQuantity(n, resource.DecimalSI)
		requests[corev1.ResourceCPU] = q
		limits[corev1.ResourceCPU] = q
		return nil
	}
	req, hasReq := vmiRes.Requests[corev1.ResourceCPU]
	lim, hasLim := vmiRes.Limits[corev1.ResourceCPU]
	switch {
	case hasReq && hasLim && req.Cmp(lim) > 0:
		return f.ref.errorf("spec.domain.resources.requests.cpu", "%s is more than the limit %s", req.String(), lim.String())
	case hasReq:
		if req.Sign() < 0 {
			return f.ref.errorf("spec.domain.resources.requests.cpu", "%s must not be negative", req.String())
		}
	case hasLim:
		requests[corev1.ResourceCPU] = lim.DeepCopy()
	default:
		milli := max((f.vcpus*1000+int64(ratio)-1)/int64(ratio), 1)
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
	}
	return nil
}

func setMemory(f *guestFacts, vmiRes *v1.ResourceRequirements, overhead int64, requests, limits corev1.ResourceList) error {
	// The memory request of the VMI is what the pod asks for beyond the
	// overhead, as in KubeVirt, even below the guest's memory: that is how
	// memory is overcommitted (by hand, or by the KubeVirt CR's
	// memoryOvercommit through the defaults). Without one, the guest's
	// memory.
	asked := f.guestMemory
	if r, ok := vmiRes.Requests[corev1.ResourceMemory]; ok {
		if r.Sign() < 0 || r.CmpInt64(maxGuestMemory) > 0 {
			return f.ref.errorf("spec.domain.resources.requests.memory", "%s must not be negative or more than 64Ti", r.String())
		}
		asked = r.Value()
	}
	var request int64
	if f.hugePages != "" {
		hp := corev1.ResourceName(corev1.ResourceHugePagesPrefix + f.hugePages)
		q := *resource.NewQuantity(f.guestMemory, resource.BinarySI)
		requests[hp] = q
		limits[hp] = q
		request = overhead + max(asked-f.guestMemory, 0)
	} else {
		request = asked
		if !vmiRes.OvercommitGuestOverhead {
			request += overhead
		}
	}
	requests[corev1.ResourceMemory] = *resource.NewQuantity(request, resource.BinarySI)

	switch l, ok := vmiRes.Limits[corev1.ResourceMemory]; {
	case f.dedicated:
		limits[corev1.ResourceMemory] = *resource.NewQuantity(request, resource.BinarySI)
	case ok:
		if l.CmpInt64(maxGuestMemory) > 0 {
			return f.ref.errorf("spec.domain.resources.limits.memory", "%s is more than 64Ti", l.String())
		}
		limit := l.Value()
		if f.hugePages != "" {
			limit = max(limit-f.guestMemory, 0)
		} else if limit < f.guestMemory {
			return f.ref.errorf("spec.domain.resources.limits.memory", "%s is less than the guest memory (%d bytes)", l.String(), f.guestMemory)
		}
		limit += overhead
		if request > limit {
			return f.ref.errorf("spec.domain.resources.requests.memory", "the pod would request %d bytes, more than its limit of %d bytes", request, limit)
		}
		limits[corev1.ResourceMemory] = *resource.NewQuantity(limit, resource.BinarySI)
	}
	return nil
}

// copyingInitResources are those of a Guaranteed pod's init container that
// copies its image in (see diskContainers): the compute container's CPU,
// and a helper's 40M of memory, requests = limits.
func copyingInitResources(computeCPU resource.Quantity) corev1.ResourceRequirements {
	r := helperResources(true, false)
	r.Requests[corev1.ResourceCPU] = computeCPU.DeepCopy()
	r.Limits[corev1.ResourceCPU] = computeCPU.DeepCopy()
	return r
}

// helperResources are the requests and limits of a helper container:
// 10m CPU and 1M memory requested, 100m and 40M at most; requests = limits
// (10m, 40M) for a Guaranteed pod. Disk sidecars also request 50M of
// ephemeral storage.
func helperResources(dedicated, scratch bool) corev1.ResourceRequirements {
	n := 2
	if scratch {
		n = 3
	}
	requests := make(corev1.ResourceList, n)
	limits := make(corev1.ResourceList, 2)
	limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(helperCPULimitMilli, resource.DecimalSI)
	limits[corev1.ResourceMemory] = *resource.NewQuantity(helperMemoryLimit, resource.DecimalSI)
	if dedicated {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(helperCPURequestMilli, resource.DecimalSI)
		requests[corev1.ResourceCPU] = limits[corev1.ResourceCPU]
		requests[corev1.ResourceMemory] = limits[corev1.ResourceMemory]
	} else {
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(helperCPURequestMilli, resource.DecimalSI)
		requests[corev1.ResourceMemory] = *resource.NewQuantity(helperMemoryRequest, resource.DecimalSI)
	}
	if scratch {
		requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(ephemeralStorageRequest, resource.DecimalSI)
	}
	return corev1.ResourceRequirements{Requests: requests, Limits: limits}
}
