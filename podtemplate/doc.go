// Package podtemplate renders the launcher Pod of a VirtualMachineInstance:
// the pod the VMI controller creates and in which the guest runs.
//
// A [Renderer] is built once from a [Config] (launcher image, directories,
// timeouts, whether emulation is allowed, the memory overhead policy) and is
// then safe for concurrent use. [Renderer.RenderLaunchPod] turns a VMI into
// its pod; [Renderer.RenderMigrationTargetPod] renders the same pod as the
// target of a live migration, kept off the source node. The pod looks like
// the one KubeVirt's virt-controller creates (same container, volume, label
// and annotation names, same launcher flags), so tools written for KubeVirt
// recognise it:
//
//   - generateName virt-launcher-<vmi name>-, the VMI's namespace, a
//     controller owner reference to the VMI, the labels kubevirt.io=virt-launcher
//     and kubevirt.io/created-by=<vmi uid> plus the VMI's own labels, the
//     annotation kubevirt.io/domain=<vmi name>;
//   - the compute container running /usr/bin/virt-launcher, with emptyDir
//     volumes for its sockets, libvirt's runtime directory, ephemeral disks
//     and container disks, and a volume for every PVC, DataVolume, host disk
//     (only with the HostDisk feature gate, see [HostDiskGate]), ConfigMap,
//     Secret and Downward API volume of the VMI;
//   - for every containerDisk an init container that pulls the image early and
//     a sidecar that serves the disk to the launcher, both running the
//     container-disk helper copied out of the launcher image by the
//     container-disk-binary init container;
//   - a memory request of the VMI's memory request (else its guest memory)
//     plus [Renderer.MemoryOverhead], the
//     devices.kubevirt.io/kvm (with /dev/vhost-net where the node has it)
//     and tun device resources, and
//     Guaranteed QoS for VMIs with dedicated CPUs;
//   - the node selector kubevirt.io/schedulable=true merged with the VMI's
//     own placement (node selector, affinity, tolerations, topology spread,
//     scheduler name, priority class).
//
// Rendering is a pure function of the VMI and the Config: it reads nothing
// from the cluster (except through [Config.ClaimVolumeMode], when set), never
// changes the VMI, and the returned pod shares no memory with the VMI, so the
// caller may modify the pod freely. Input the renderer cannot turn into a
// valid pod is reported as a [*FieldError] naming the VMI and the field; no
// pod is returned with it.
//
// docs/podtemplate.md explains the memory overhead formula and every part of
// the pod.
package podtemplate
