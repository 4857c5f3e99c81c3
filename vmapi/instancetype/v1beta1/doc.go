// Package v1beta1 holds the instancetype.kubevirt.io/v1beta1 API: instance
// types (VirtualMachineInstancetype, VirtualMachineClusterInstancetype) say
// how big a VM is (vCPUs, memory, GPUs, host devices), and preferences
// (VirtualMachinePreference, VirtualMachineClusterPreference) say which
// devices and features suit its guest OS. A VirtualMachine names them in
// spec.instancetype and spec.preference; the VM controller expands them into
// the VirtualMachineInstances it creates (see vmapi/instancetype).
//
// The types are wire-compatible with KubeVirt's instancetype.kubevirt.io/v1beta1:
// the same kinds, JSON field names and enum strings, so KubeVirt's instance
// types and preferences (common-instancetypes among them) apply unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=instancetype.kubevirt.io
// +groupGoName=Instancetype
package v1beta1
