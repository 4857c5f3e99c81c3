// Package v1beta1 holds the export.kubevirt.io/v1beta1 API: a
// VirtualMachineExport makes a stopped VirtualMachine's disks, or a
// PersistentVolumeClaim, downloadable over token-authenticated HTTPS from an
// export server pod behind a Service, for a limited time (spec.ttlDuration,
// two hours by default). vmcontrol/export reconciles it; exportserver serves
// the downloads.
//
// The types are wire-compatible with KubeVirt's export.kubevirt.io/v1beta1:
// the same kind, JSON field names, enum strings, phases, condition types and
// link layout, so KubeVirt's virtctl vmexport works unchanged. Which fields
// vmkit acts on is listed in docs/api-compatibility.md.
//
// +k8s:deepcopy-gen=package
// +groupName=export.kubevirt.io
// +groupGoName=Export
package v1beta1
