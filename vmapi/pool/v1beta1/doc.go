// Package v1beta1 holds the pool.kubevirt.io/v1beta1 API: a
// VirtualMachinePool keeps spec.replicas VirtualMachines made from one
// template, each with its own name (<pool>-<index>) and its own copies of
// the template's DataVolumes, which vmcontrol/pool reconciles.
//
// The types are wire-compatible with KubeVirt's pool.kubevirt.io/v1beta1:
// the same kind, JSON field names and enum strings, so KubeVirt's pool
// manifests apply unchanged. Which fields vmkit acts on is listed in
// docs/api-compatibility.md.
//
// +k8s:deepcopy-gen=package
// +groupName=pool.kubevirt.io
// +groupGoName=Pool
package v1beta1
