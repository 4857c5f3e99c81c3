package v1

import "fmt"

// RunStrategy returns the run strategy in effect: spec.runStrategy, or
// Always/Halted from the deprecated spec.running, or Halted when neither is
// set. Setting both is an error, as the CRD's rule also says.
func (vm *VirtualMachine) RunStrategy() (VirtualMachineRunStrategy, error) {
	switch {
	case vm.Spec.Running != nil && vm.Spec.RunStrategy != nil:
		return RunStrategyUnknown, fmt.Errorf("VirtualMachine %s/%s: spec.running and spec.runStrategy are mutually exclusive", vm.Namespace, vm.Name)
	case vm.Spec.RunStrategy != nil:
		return *vm.Spec.RunStrategy, nil
	case vm.Spec.Running != nil && *vm.Spec.Running:
		return RunStrategyAlways, nil
	default:
		return RunStrategyHalted, nil
	}
}

// IsFinal reports whether the VMI reached a phase it never leaves
// (Succeeded or Failed).
func (vmi *VirtualMachineInstance) IsFinal() bool {
	return vmi.Status.Phase == Succeeded || vmi.Status.Phase == Failed
}

// IsRunning reports whether the VMI's guest runs.
func (vmi *VirtualMachineInstance) IsRunning() bool {
	return vmi.Status.Phase == Running
}

// IsScheduled reports whether the VMI's launcher pod runs on a node.
func (vmi *VirtualMachineInstance) IsScheduled() bool {
	return vmi.Status.Phase == Scheduled
}

// IsUnprocessed reports whether no controller has acted on the VMI yet.
func (vmi *VirtualMachineInstance) IsUnprocessed() bool {
	return vmi.Status.Phase == VmPhaseUnset || vmi.Status.Phase == Pending
}

// IsMarkedForDeletion reports whether the VMI is being deleted.
func (vmi *VirtualMachineInstance) IsMarkedForDeletion() bool {
	return vmi.DeletionTimestamp != nil
}

// IsFinal reports whether the migration reached a phase it never leaves.
func (m *VirtualMachineInstanceMigration) IsFinal() bool {
	return m.Status.Phase == MigrationSucceeded || m.Status.Phase == MigrationFailed
}

// DomainName is the libvirt domain name of a VMI: <namespace>_<name>.
func (vmi *VirtualMachineInstance) DomainName() string {
	return vmi.Namespace + "_" + vmi.Name
}

// VMICondition returns the VMI's condition of the given type, or nil.
func (vmi *VirtualMachineInstance) VMICondition(t VirtualMachineInstanceConditionType) *VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

// VMCondition returns the VM's condition of the given type, or nil.
func (vm *VirtualMachine) VMCondition(t VirtualMachineConditionType) *VirtualMachineCondition {
	for i := range vm.Status.Conditions {
		if vm.Status.Conditions[i].Type == t {
			return &vm.Status.Conditions[i]
		}
	}
	return nil
}

// BoolPtr returns a pointer to b, for optional API fields.
func BoolPtr(b bool) *bool { return &b }

// RunStrategyPtr returns a pointer to s, for spec.runStrategy.
func RunStrategyPtr(s VirtualMachineRunStrategy) *VirtualMachineRunStrategy { return &s }

// BackendStorageClaimPrefix starts the name of the claim that keeps a
// VMI's persistent state, KubeVirt's backend storage: persistent-state-for-
// followed by the VMI's name (its VM's name), so every VMI of a VM finds the
// state the previous one left.
const BackendStorageClaimPrefix = "persistent-state-for-"

// BackendStorageClaimSize is the size of a backend-storage claim (KubeVirt's).
const BackendStorageClaimSize = "10Mi"

// BackendStorageClaimName is the name of the backend-storage claim of the
// VMI (or VM) named name.
func BackendStorageClaimName(name string) string { return BackendStorageClaimPrefix + name }

// PersistentTPM reports whether spec asks for a TPM whose state outlives
// the VMI (devices.tpm.persistent, the TPM not disabled).
func PersistentTPM(spec *VirtualMachineInstanceSpec) bool {
	t := spec.Domain.Devices.TPM
	return t != nil && (t.Enabled == nil || *t.Enabled) && t.Persistent != nil && *t.Persistent
}

// PersistentEFI reports whether spec asks for an EFI variable store that
// outlives the VMI (firmware.bootloader.efi.persistent).
func PersistentEFI(spec *VirtualMachineInstanceSpec) bool {
	fw := spec.Domain.Firmware
	return fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil && fw.Bootloader.EFI.Persistent != nil && *fw.Bootloader.EFI.Persistent
}

// NeedsBackendStorage reports whether spec has persistent state (a
// persistent TPM or EFI variable store), which lives on the claim
// BackendStorageClaimName names.
func NeedsBackendStorage(spec *VirtualMachineInstanceSpec) bool {
	return PersistentTPM(spec) || PersistentEFI(spec)
}
