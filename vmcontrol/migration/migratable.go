package migration

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Reasons of a LiveMigratable condition that is False (KubeVirt's).
const (
	ReasonDisksNotMigratable      = "DisksNotLiveMigratable"
	ReasonInterfaceNotMigratable  = "InterfaceNotLiveMigratable"
	ReasonHostDeviceNotMigratable = "HostDeviceNotLiveMigratable"
	ReasonSEVNotMigratable        = "SEVNotLiveMigratable"
	ReasonTDXNotMigratable        = "TDXNotLiveMigratable"
	ReasonPRNotMigratable         = "PersistentReservationNotLiveMigratable"
)

// AllowPodBridgeNetworkLiveMigrationAnnotation on a VMI lets a guest whose
// pod network interface uses the bridge binding migrate (KubeVirt's): the
// guest keeps its address, which the target pod does not have.
const AllowPodBridgeNetworkLiveMigrationAnnotation = "kubevirt.io/allow-pod-bridge-network-live-migration"

// ClaimLookup returns the PersistentVolumeClaim of a VMI's namespace by
// name, nil when there is none.
type ClaimLookup func(namespace, name string) *corev1.PersistentVolumeClaim

// LiveMigratable is the VMI's LiveMigratable condition as KubeVirt's node
// agent computes it, from the spec and the access modes of its claims, and
// the migration method it implies: BlockMigration when some volume lives in
// the launcher pod (container disks, empty disks, cloud-init and config
// volumes are copied to the target), LiveMigration when every disk is
// shared. The first reason that applies, in KubeVirt's order:
//   - InterfaceNotLiveMigratable: the pod network's interface uses neither
//     masquerade nor passt (the passtBinding migrates with its link
//     refreshed on the target; bridge is allowed with the annotation
//     kubevirt.io/allow-pod-bridge-network-live-migration), or no interface
//     is attached to it;
//   - HostDeviceNotLiveMigratable: host devices or GPUs;
//   - SEVNotLiveMigratable, TDXNotLiveMigratable: a confidential guest;
//   - PersistentReservationNotLiveMigratable: a LUN with SCSI persistent
//     reservation;
//   - DisksNotLiveMigratable: a PVC or DataVolume whose claim is not
//     ReadWriteMany (or not found), the backend-storage claim of a VMI
//     with persistent state likewise (hotplugged claims included), a
//     hostDisk not marked shared, or (vmkit's) a memoryDump volume: a
//     dump under way.
func LiveMigratable(vmi *v1.VirtualMachineInstance, claims ClaimLookup) (v1.VirtualMachineInstanceCondition, v1.VirtualMachineInstanceMigrationMethod) {
	method, diskErr := checkVolumes(vmi, claims)
	no := func(reason, msg string) (v1.VirtualMachineInstanceCondition, v1.VirtualMachineInstanceMigrationMethod) {
		return v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, Reason: reason, Message: msg}, method
	}
	spec := &vmi.Spec
	if msg := checkInterfaces(vmi); msg != "" {
		return no(ReasonInterfaceNotMigratable, msg)
	}
	switch devices := &spec.Domain.Devices; {
	case len(devices.HostDevices) > 0:
		return no(ReasonHostDeviceNotMigratable, "VMI specifies non-migratable generic PCI host device")
	case len(devices.GPUs) > 1:
		return no(ReasonHostDeviceNotMigratable, "VMI specifies too many GPUs")
	case len(devices.GPUs) == 1:
		return no(ReasonHostDeviceNotMigratable, "VMI specifies a GPU but feature gate VGPULiveMigration is not enabled")
	}
	if ls := spec.Domain.LaunchSecurity; ls != nil {
		switch {
		case ls.SEV != nil:
			return no(ReasonSEVNotMigratable, "VMI uses SEV")
		case ls.TDX != nil:
			return no(ReasonTDXNotMigratable, "VMI uses TDX")
		}
	}
	for _, d := range spec.Domain.Devices.Disks {
		if d.LUN != nil && d.LUN.Reservation {
			return no(ReasonPRNotMigratable, "VMI uses SCSI persistent reservation")
		}
	}
	if diskErr != "" {
		return no(ReasonDisksNotMigratable, diskErr)
	}
	return v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}, method
}

// checkInterfaces is KubeVirt's check of the pod network's interface; ""
// when it can migrate.
func checkInterfaces(vmi *v1.VirtualMachineInstance) string {
	ifaces := vmi.Spec.Domain.Devices.Interfaces
	if len(ifaces) == 0 {
		return ""
	}
	i := slices.IndexFunc(vmi.Spec.Networks, func(n v1.Network) bool { return n.Pod != nil })
	if i < 0 {
		return ""
	}
	name := vmi.Spec.Networks[i].Name
	j := slices.IndexFunc(ifaces, func(iface v1.Interface) bool { return iface.Name == name })
	if j < 0 {
		return fmt.Sprintf("no primary interface found for network %s", name)
	}
	switch iface := ifaces[j]; {
	case iface.Masquerade != nil || iface.Passt != nil:
		return ""
	case iface.PasstBinding != nil:
		// KubeVirt carries passt's connections across with passt-repair,
		// which needs a newer passt than Debian 12's; vmkit's target
		// launcher starts its own passt and takes the guest's link down
		// and up, so the guest takes the target pod's address by DHCP
		// and its connections end (KubeVirt's link refresh).
		return ""
	case iface.Bridge != nil:
		if _, ok := vmi.Annotations[AllowPodBridgeNetworkLiveMigrationAnnotation]; ok {
			return ""
		}
	}
	return "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network"
}

// checkVolumes is KubeVirt's check of the volumes: the migration method,
// and why the disks cannot migrate ("" when they can).
func checkVolumes(vmi *v1.VirtualMachineInstance, claims ClaimLookup) (v1.VirtualMachineInstanceMigrationMethod, string) {
	method := v1.LiveMigration
	if v1.NeedsBackendStorage(&vmi.Spec) {
		// The persistent TPM or EFI state is on a claim both pods mount.
		name := v1.BackendStorageClaimName(vmi.Name)
		if claim := claims(vmi.Namespace, name); claim == nil || !sharedClaim(claim) {
			return v1.BlockMigration, fmt.Sprintf("cannot migrate VMI: backend-storage PVC %v (its persistent state) is not shared, live migration requires ReadWriteMany", name)
		}
	}
	for _, vol := range vmi.Spec.Volumes {
		if vol.MemoryDump != nil {
			// The dump is written by the source's QEMU into the claim the
			// source's node agent mounted; it ends with the dump.
			return method, fmt.Sprintf("cannot migrate VMI: a memory dump onto volume %s is under way", vol.Name)
		}
		// A hotplugged claim counts as any claim: the target's node agent
		// mounts it into the target's launcher before the guest moves.
		switch src := &vol.VolumeSource; {
		case src.PersistentVolumeClaim != nil || src.DataVolume != nil:
			name := ""
			if src.PersistentVolumeClaim != nil {
				name = src.PersistentVolumeClaim.ClaimName
			} else {
				name = src.DataVolume.Name
			}
			claim := claims(vmi.Namespace, name)
			if claim == nil {
				return v1.BlockMigration, fmt.Sprintf("cannot migrate VMI: Unable to determine if PVC %v is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", name)
			}
			if !sharedClaim(claim) {
				return v1.BlockMigration, fmt.Sprintf("cannot migrate VMI: PVC %v is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", name)
			}
		case src.HostDisk != nil:
			if src.HostDisk.Shared == nil || !*src.HostDisk.Shared {
				return v1.BlockMigration, "cannot migrate VMI with non-shared HostDisk"
			}
		default:
			if readOnlyCDRom(vmi, vol.Name) {
				continue
			}
			// Container disks, empty disks, ephemeral overlays and the
			// config volumes live in the launcher pod: the target gets its
			// own copy and the domain's disks are copied over.
			method = v1.BlockMigration
		}
	}
	return method, ""
}

// sharedClaim reports whether a claim may be mounted on two nodes at once:
// ReadWriteMany (in its status once bound, else as requested).
func sharedClaim(claim *corev1.PersistentVolumeClaim) bool {
	modes := claim.Status.AccessModes
	if len(modes) == 0 {
		modes = claim.Spec.AccessModes
	}
	return slices.Contains(modes, corev1.ReadWriteMany)
}

func readOnlyCDRom(vmi *v1.VirtualMachineInstance, volume string) bool {
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name == volume && d.CDRom != nil {
			return d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly
		}
	}
	return false
}

// migratableCondition is the VMI's LiveMigratable condition, nil if unset.
func migratableCondition(vmi *v1.VirtualMachineInstance) *v1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == v1.VirtualMachineInstanceIsMigratable {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}
