package v1

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults the SetDefaults_ functions fill in. The machine type is
// KubeVirt's default for the guest's architecture; SetClusterDefaults
// applies the KubeVirt CR's machine type, CPU model, CPU request, memory
// overcommit and default network interface on top.
const (
	// DefaultDiskBus is the bus of a disk whose bus is unset.
	DefaultDiskBus = DiskBusVirtio
	// DefaultCDRomBus is the bus of a CD-ROM whose bus is unset.
	DefaultCDRomBus = DiskBusSATA
	// DefaultLUNBus is the bus of a LUN whose bus is unset.
	DefaultLUNBus = DiskBusSCSI
	// DefaultInterfaceModel is the NIC model of an interface whose model is unset.
	DefaultInterfaceModel = "virtio"
	// DefaultPodNetworkName names the pod network and interface added to a
	// guest that lists neither interfaces nor networks.
	DefaultPodNetworkName = "default"
	// DefaultTerminationGracePeriodSeconds is the guest's shutdown grace period when unset.
	DefaultTerminationGracePeriodSeconds int64 = 30
	// DefaultReplicaSetReplicas is a replica set's replica count when unset.
	DefaultReplicaSetReplicas int32 = 1
)

// SetDefaults_VirtualMachineInstance fills in the defaults of a VMI's spec.
// It is safe to call more than once.
func SetDefaults_VirtualMachineInstance(vmi *VirtualMachineInstance) {
	if vmi == nil {
		return
	}
	SetDefaults_VirtualMachineInstanceSpec(&vmi.Spec)
}

// SetDefaults_VirtualMachineInstanceSpec fills in the defaults of a VMI spec,
// in place:
//
//   - a disk with none of disk, lun and cdrom becomes a disk;
//   - an unset bus becomes virtio for disks, sata for CD-ROMs and scsi for LUNs;
//   - a CD-ROM is read-only with its tray closed unless it says otherwise;
//   - an unset interface model becomes virtio;
//   - a guest with no interfaces and no networks, whose
//     devices.autoattachPodInterface is not false, gets a pod network named
//     "default" and a bridge interface of the same name;
//   - an unset CPU or memory request takes the value of its limit, as for pods;
//   - terminationGracePeriodSeconds becomes 30 when unset;
//   - an unset machine type becomes KubeVirt's default for the architecture
//     (q35 on amd64, virt on arm64, s390-ccw-virtio on s390x);
//   - the guest's memory (domain.memory.guest) and the memory request
//     fill in each other when only one is set, as KubeVirt's virt-api does
//     without overcommit.
//
// These are what KubeVirt's virt-api stores at admission; vmkit's
// controllers apply them in the write that creates or first updates a VMI,
// so no webhook is needed.
func SetDefaults_VirtualMachineInstanceSpec(spec *VirtualMachineInstanceSpec) {
	_ = SetClusterDefaults(spec, nil) // without a configuration nothing can fail
}

// Values of the KubeVirt CR's spec.configuration.network.defaultNetworkInterface.
const (
	DefaultNetworkInterfaceBridge     = "bridge"
	DefaultNetworkInterfaceMasquerade = "masquerade"
	DefaultNetworkInterfaceSlirp      = "slirp"
)

// DefaultCPURequest is the KubeVirt CR's spec.configuration.cpuRequest when
// unset. A VMI is given a CPU request only when the CR sets another value;
// otherwise the launcher pod's CPU request comes from the guest's vCPUs and
// developerConfiguration.cpuAllocationRatio (podtemplate), as in KubeVirt.
var DefaultCPURequest = resource.MustParse("100m")

// DefaultMemoryOvercommit is the KubeVirt CR's
// developerConfiguration.memoryOvercommit when unset: 100 percent, the
// guest's memory requested in full.
const DefaultMemoryOvercommit = 100

// SetClusterDefaults fills in the defaults of a VMI spec as
// SetDefaults_VirtualMachineInstanceSpec does, with five of them taken from
// the KubeVirt CR's spec.configuration cfg, as KubeVirt's virt-api takes
// them when it admits a VMI (nil cfg: none of them):
//
//   - cpuModel is the CPU model of a guest that names none;
//   - cpuRequest, when set to another value than DefaultCPURequest, is the
//     CPU request of a guest that sets none (nor a CPU limit) and does not
//     ask for dedicatedCpuPlacement;
//   - machineType, else architectureConfiguration's machineType for the
//     guest's architecture, is the machine type of a guest that names none
//     (KubeVirt's default for the architecture when neither is set);
//   - developerConfiguration.memoryOvercommit (percent, 100 when unset): a
//     guest whose memory (domain.memory.guest) is set and whose memory
//     request is not requests guest × 100 / memoryOvercommit;
//   - network.defaultNetworkInterface is the binding of the pod interface
//     added to a guest with no interfaces and no networks: bridge (the
//     default; refused when network.permitBridgeInterfaceOnPodNetwork is
//     false), masquerade, or slirp (only with network.permitSlirpInterface).
//
// A setting that cannot be applied is an error naming its field under
// spec.configuration, and the spec is then left unchanged; a setting the
// spec does not need (a default interface for a guest that names its own)
// is not checked, as in KubeVirt.
func SetClusterDefaults(spec *VirtualMachineInstanceSpec, cfg *KubeVirtConfiguration) error {
	if spec == nil {
		return nil
	}
	c := resolveClusterDefaults(cfg)
	work := spec.DeepCopy()
	setDefaultResourceRequests(&work.Domain.Resources)
	if err := setDefaultCPURequest(&work.Domain, c); err != nil {
		return err
	}
	if err := setDefaultGuestMemory(&work.Domain, c); err != nil {
		return err
	}
	if c.cpuModel != "" && (work.Domain.CPU == nil || work.Domain.CPU.Model == "") {
		if work.Domain.CPU == nil {
			work.Domain.CPU = &CPU{}
		}
		work.Domain.CPU.Model = c.cpuModel
	}
	if work.Domain.Machine == nil {
		work.Domain.Machine = &Machine{}
	}
	if work.Domain.Machine.Type == "" {
		work.Domain.Machine.Type = c.machineType(work.Architecture)
	}
	for i := range work.Domain.Devices.Disks {
		setDefaultDiskDevice(&work.Domain.Devices.Disks[i].DiskDevice)
	}
	if err := setDefaultPodInterface(work, c); err != nil {
		return err
	}
	for i := range work.Domain.Devices.Interfaces {
		if work.Domain.Devices.Interfaces[i].Model == "" {
			work.Domain.Devices.Interfaces[i].Model = DefaultInterfaceModel
		}
	}
	if work.TerminationGracePeriodSeconds == nil {
		grace := DefaultTerminationGracePeriodSeconds
		work.TerminationGracePeriodSeconds = &grace
	}
	*spec = *work
	return nil
}

// clusterDefaults are the KubeVirt CR's settings SetClusterDefaults applies.
// A setting that cannot be applied keeps its error until a spec needs it.
type clusterDefaults struct {
	cpuModel      string
	cpuRequest    *resource.Quantity // nil: KubeVirt's default, which leaves VMIs alone
	cpuRequestErr error
	machine       string             // the deprecated machineType, which wins
	archs         *ArchConfiguration // per-architecture machine types
	overcommit    int64
	overcommitErr error
	binding       InterfaceBindingMethod
	bindingErr    error
}

// resolveClusterDefaults reads cfg's settings, with KubeVirt's defaults for
// those it leaves unset.
func resolveClusterDefaults(cfg *KubeVirtConfiguration) clusterDefaults {
	c := clusterDefaults{overcommit: DefaultMemoryOvercommit, binding: InterfaceBindingMethod{Bridge: &InterfaceBridge{}}}
	if cfg == nil {
		return c
	}
	c.cpuModel, c.machine, c.archs = cfg.CPUModel, cfg.MachineType, cfg.ArchitectureConfiguration
	if q := cfg.CPURequest; q != nil && q.Cmp(DefaultCPURequest) != 0 {
		if q.Sign() <= 0 {
			c.cpuRequestErr = fmt.Errorf("spec.configuration.cpuRequest: %s is not a CPU quantity above 0", q.String())
		}
		c.cpuRequest = q
	}
	if dc := cfg.DeveloperConfiguration; dc != nil && dc.MemoryOvercommit != 0 {
		if dc.MemoryOvercommit < 0 {
			c.overcommitErr = fmt.Errorf("spec.configuration.developerConfiguration.memoryOvercommit: %d is not a percentage above 0", dc.MemoryOvercommit)
		}
		c.overcommit = int64(dc.MemoryOvercommit)
	}
	if n := cfg.Network; n != nil {
		switch n.DefaultNetworkInterface {
		case "", DefaultNetworkInterfaceBridge:
			if n.PermitBridgeInterfaceOnPodNetwork != nil && !*n.PermitBridgeInterfaceOnPodNetwork {
				c.bindingErr = errors.New("spec.configuration.network.defaultNetworkInterface: bridge is not permitted on the pod network (network.permitBridgeInterfaceOnPodNetwork is false)")
			}
		case DefaultNetworkInterfaceMasquerade:
			c.binding = InterfaceBindingMethod{Masquerade: &InterfaceMasquerade{}}
		case DefaultNetworkInterfaceSlirp:
			if n.PermitSlirpInterface == nil || !*n.PermitSlirpInterface {
				c.bindingErr = errors.New("spec.configuration.network.defaultNetworkInterface: slirp is not permitted (network.permitSlirpInterface is not true)")
			}
			c.binding = InterfaceBindingMethod{Slirp: &InterfaceSlirp{}}
		default:
			c.bindingErr = fmt.Errorf("spec.configuration.network.defaultNetworkInterface: %q is not bridge, masquerade or slirp", n.DefaultNetworkInterface)
		}
	}
	return c
}

// machineType is the default machine type of a guest of architecture arch,
// in KubeVirt's order: machineType, the architecture's machineType,
// KubeVirt's default for the architecture.
func (c clusterDefaults) machineType(arch string) string {
	if c.machine != "" {
		return c.machine
	}
	if c.archs != nil {
		var a *ArchSpecificConfiguration
		switch arch {
		case "", "amd64":
			a = c.archs.Amd64
		case "arm64":
			a = c.archs.Arm64
		case "ppc64le":
			a = c.archs.Ppc64le
		case "s390x":
			a = c.archs.S390x
		}
		if a != nil && a.MachineType != "" {
			return a.MachineType
		}
	}
	return DefaultMachineType(arch)
}

// SetDefaults_VirtualMachine fills in the defaults of a VM's template spec.
func SetDefaults_VirtualMachine(vm *VirtualMachine) {
	if vm == nil || vm.Spec.Template == nil {
		return
	}
	SetDefaults_VirtualMachineInstanceSpec(&vm.Spec.Template.Spec)
}

// SetDefaults_VirtualMachineInstanceReplicaSet sets spec.replicas to 1 when unset.
func SetDefaults_VirtualMachineInstanceReplicaSet(rs *VirtualMachineInstanceReplicaSet) {
	if rs == nil {
		return
	}
	if rs.Spec.Replicas == nil {
		replicas := DefaultReplicaSetReplicas
		rs.Spec.Replicas = &replicas
	}
}

// SetDefaults_KubeVirt sets spec.uninstallStrategy to
// BlockUninstallIfWorkloadsExist and spec.imagePullPolicy to IfNotPresent
// when unset.
func SetDefaults_KubeVirt(kv *KubeVirt) {
	if kv == nil {
		return
	}
	if kv.Spec.UninstallStrategy == "" {
		kv.Spec.UninstallStrategy = KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist
	}
	if kv.Spec.ImagePullPolicy == "" {
		kv.Spec.ImagePullPolicy = corev1.PullIfNotPresent
	}
}

// setDefaultDiskDevice makes a disk with no device a plain disk and fills in
// the bus and CD-ROM settings of whichever devices are set.
func setDefaultDiskDevice(dev *DiskDevice) {
	if dev.Disk == nil && dev.LUN == nil && dev.CDRom == nil {
		dev.Disk = &DiskTarget{}
	}
	if dev.Disk != nil && dev.Disk.Bus == "" {
		dev.Disk.Bus = DefaultDiskBus
	}
	if dev.LUN != nil && dev.LUN.Bus == "" {
		dev.LUN.Bus = DefaultLUNBus
	}
	if dev.CDRom != nil {
		if dev.CDRom.Bus == "" {
			dev.CDRom.Bus = DefaultCDRomBus
		}
		if dev.CDRom.ReadOnly == nil {
			dev.CDRom.ReadOnly = BoolPtr(true)
		}
		if dev.CDRom.Tray == "" {
			dev.CDRom.Tray = TrayStateClosed
		}
	}
}

// setDefaultPodInterface connects a guest that lists no interfaces and no
// networks to the pod network through c's binding, unless autoattach is
// off; an error when that binding cannot be used.
func setDefaultPodInterface(spec *VirtualMachineInstanceSpec, c clusterDefaults) error {
	devices := &spec.Domain.Devices
	if devices.AutoattachPodInterface != nil && !*devices.AutoattachPodInterface {
		return nil
	}
	if len(devices.Interfaces) != 0 || len(spec.Networks) != 0 {
		return nil
	}
	if c.bindingErr != nil {
		return c.bindingErr
	}
	devices.Interfaces = []Interface{{
		Name:                   DefaultPodNetworkName,
		InterfaceBindingMethod: c.binding,
	}}
	spec.Networks = []Network{{
		Name:          DefaultPodNetworkName,
		NetworkSource: NetworkSource{Pod: &PodNetwork{}},
	}}
	return nil
}

// setDefaultResourceRequests copies the CPU and memory limits into unset
// requests, as Kubernetes does for containers.
func setDefaultResourceRequests(res *ResourceRequirements) {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		limit, hasLimit := res.Limits[name]
		if !hasLimit {
			continue
		}
		if _, hasRequest := res.Requests[name]; hasRequest {
			continue
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Requests[name] = limit.DeepCopy()
	}
}

// setDefaultCPURequest gives a guest with no CPU request (after the limit
// filled it in) the KubeVirt CR's cpuRequest, unless its vCPUs are
// dedicated (their request is the vCPU count, set by the launcher pod).
func setDefaultCPURequest(dom *DomainSpec, c clusterDefaults) error {
	if c.cpuRequest == nil {
		return nil
	}
	if _, ok := dom.Resources.Requests[corev1.ResourceCPU]; ok {
		return nil
	}
	if dom.CPU != nil && dom.CPU.DedicatedCPUPlacement {
		return nil
	}
	if c.cpuRequestErr != nil {
		return c.cpuRequestErr
	}
	if dom.Resources.Requests == nil {
		dom.Resources.Requests = corev1.ResourceList{}
	}
	dom.Resources.Requests[corev1.ResourceCPU] = c.cpuRequest.DeepCopy()
	return nil
}

// DefaultMachineType is KubeVirt's machine type for an architecture
// ("amd64" when empty), or "" for one KubeVirt does not know.
func DefaultMachineType(arch string) string {
	switch arch {
	case "", "amd64":
		return "q35"
	case "arm64":
		return "virt"
	case "s390x":
		return "s390-ccw-virtio"
	}
	return ""
}

// setDefaultGuestMemory sets the guest's memory from the memory request, or
// the request from the guest's memory: c's overcommit percent of it (an
// error when c's overcommit cannot be used).
func setDefaultGuestMemory(d *DomainSpec, c clusterDefaults) error {
	request, hasRequest := d.Resources.Requests[corev1.ResourceMemory]
	switch {
	case hasRequest && (d.Memory == nil || d.Memory.Guest == nil):
		if d.Memory == nil {
			d.Memory = &Memory{}
		}
		guest := request.DeepCopy()
		d.Memory.Guest = &guest
	case !hasRequest && d.Memory != nil && d.Memory.Guest != nil && d.Memory.Guest.Value() > 0:
		if c.overcommitErr != nil {
			return c.overcommitErr
		}
		if d.Resources.Requests == nil {
			d.Resources.Requests = corev1.ResourceList{}
		}
		request := d.Memory.Guest.DeepCopy()
		if c.overcommit != DefaultMemoryOvercommit {
			request = *resource.NewQuantity(d.Memory.Guest.Value()*100/c.overcommit, d.Memory.Guest.Format)
		}
		d.Resources.Requests[corev1.ResourceMemory] = request
	}
	return nil
}
