// Package instancetype expands instance types and preferences
// (instancetype.kubevirt.io) into VirtualMachineInstances, as KubeVirt does:
// the functions here are pure, so the VM controller, virt-api's expand-spec
// and anyone embedding vmkit build the same instance from a VM.
//
//   - Apply puts an instance type's CPU (guest vCPUs become sockets, cores or
//     threads as the preference's preferredCPUTopology says), memory, GPUs,
//     host devices, node selector, scheduler, I/O threads, launch security
//     and annotations into a VMI spec, and reports every field the VM's
//     template already sets (a Conflict naming the template's field and the
//     instance type's) instead of overriding it.
//   - ApplyPreference fills what the template leaves unset with the
//     preference's preferred values (disk and interface models, firmware,
//     features, clock, machine type, ...).
//   - CheckRequirements checks a preference's requirements (least vCPUs,
//     memory, an architecture) against what the VM gives.
//   - NewControllerRevision and the *FromRevision functions store and read
//     the copy of an instance type or preference a VM pins, in a
//     ControllerRevision named and labelled as KubeVirt's.
package instancetype
