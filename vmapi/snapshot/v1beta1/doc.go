// Package v1beta1 holds the snapshot.kubevirt.io/v1beta1 API: a
// VirtualMachineSnapshot records a VirtualMachine (its spec, and its
// claims where their storage can snapshot them) in a
// VirtualMachineSnapshotContent; a VirtualMachineRestore puts a snapshot
// back onto a VM. vmcontrol/snapshot reconciles them.
//
// The types are wire-compatible with KubeVirt's snapshot.kubevirt.io/v1beta1:
// the same kinds, JSON field names, enum strings, phases, conditions and
// indications, so KubeVirt's snapshot and restore manifests apply unchanged.
// Which fields vmkit acts on is listed in docs/api-compatibility.md.
//
// +k8s:deepcopy-gen=package
// +groupName=snapshot.kubevirt.io
// +groupGoName=Snapshot
package v1beta1
