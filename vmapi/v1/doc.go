// Package v1 holds the kubevirt.io/v1 API: VirtualMachine, VirtualMachineInstance,
// VirtualMachineInstanceReplicaSet, VirtualMachineInstanceMigration and KubeVirt.
//
// The types are wire-compatible with KubeVirt's kubevirt.io/v1 API for the fields
// vmkit implements: the same kinds, JSON field names, enum strings and omitempty
// behaviour, so KubeVirt manifests apply unchanged. The package also holds the
// well-known labels, annotations and finalizers, defaulting, and validation for
// what the CRDs' schemas and CEL rules cannot express.
//
// +k8s:deepcopy-gen=package
// +groupName=kubevirt.io
package v1
