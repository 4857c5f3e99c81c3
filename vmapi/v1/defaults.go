package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Defaults the SetDefaults_ functions fill in. Values that depend on the
// cluster (machine type, CPU model, architecture, eviction strategy) are not
// here: the API server fills those in from the KubeVirt configuration.
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
//   - terminationGracePeriodSeconds becomes 30 when unset.
//
// The machine type and an unset domain.memory.guest are left alone: the
// former is a cluster setting, the latter follows resources.requests.memory.
func SetDefaults_VirtualMachineInstanceSpec(spec *VirtualMachineInstanceSpec) {
	if spec == nil {
		return
	}
	setDefaultResourceRequests(&spec.Domain.Resources)
	for i := range spec.Domain.Devices.Disks {
		setDefaultDiskDevice(&spec.Domain.Devices.Disks[i].DiskDevice)
	}
	setDefaultPodInterface(spec)
	for i := range spec.Domain.Devices.Interfaces {
		if spec.Domain.Devices.Interfaces[i].Model == "" {
			spec.Domain.Devices.Interfaces[i].Model = DefaultInterfaceModel
		}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		grace := DefaultTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &grace
	}
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
// networks to the pod network through a bridge, unless autoattach is off.
func setDefaultPodInterface(spec *VirtualMachineInstanceSpec) {
	devices := &spec.Domain.Devices
	if devices.AutoattachPodInterface != nil && !*devices.AutoattachPodInterface {
		return
	}
	if len(devices.Interfaces) != 0 || len(spec.Networks) != 0 {
		return
	}
	devices.Interfaces = []Interface{{
		Name:                   DefaultPodNetworkName,
		InterfaceBindingMethod: InterfaceBindingMethod{Bridge: &InterfaceBridge{}},
	}}
	spec.Networks = []Network{{
		Name:          DefaultPodNetworkName,
		NetworkSource: NetworkSource{Pod: &PodNetwork{}},
	}}
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
