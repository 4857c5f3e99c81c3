// Package vmkit runs virtual machines on Kubernetes the way KubeVirt does,
// as a set of Go packages a platform team can import and embed in its own
// controller manager, plus thin binaries for teams that deploy the stock
// system.
//
// The map of the SDK:
//
//   - vmapi/v1: the kubevirt.io/v1 API (VirtualMachine, VirtualMachineInstance,
//     VirtualMachineInstanceReplicaSet, VirtualMachineInstanceMigration,
//     KubeVirt), wire-compatible with KubeVirt so its manifests apply
//     unchanged; well-known labels and annotations, defaults, validation.
//   - vmapi/instancetype/v1beta1: the instancetype.kubevirt.io/v1beta1 API
//     (instance types and preferences); vmapi/instancetype expands them into
//     a VirtualMachineInstance as KubeVirt does, in pure functions.
//   - vmapi/pool/v1beta1: the pool.kubevirt.io/v1beta1 API
//     (VirtualMachinePool, N VirtualMachines from one template), which
//     vmcontrol/pool reconciles.
//   - vmapi/generated/{clientset,listers,informers}: typed clients generated
//     by k8s.io/code-generator.
//   - vmapi/crds: the CRDs, generated from the types with structural schemas
//     and CEL validation rules, embedded with go:embed.
//   - podtemplate: a VirtualMachineInstance becomes its launcher Pod.
//   - domainxml: a VirtualMachineInstance becomes a libvirt domain (pure Go).
//   - installstrategy: everything the operator installs, as objects.
//   - vmcontrol/...: the controllers of virt-controller and virt-operator.
//   - nodeagent/...: the node agent, the launcher and the hypervisor
//     interface; nodeagent/hypervisor/libvirt is the only package using cgo.
//     nodeagent/restapi is the node agent's REST API (console, VNC,
//     port-forward, pause, guest agent queries), which virt-api proxies to;
//     nodeagent/livemigration the node's side of a live migration;
//     nodeagent/metrics its Prometheus collectors; the hypervisor's
//     in-memory stand-in for tests is nodeagent/hypervisor/fake.
//     nodeagent/network wires a VMI's pod network interfaces (masquerade,
//     bridge) in its launcher pod's network namespace; nodeagent/network/dhcp
//     is the DHCP server the launcher runs for the guest.
//   - virtapi: virt-api, KubeVirt's subresource API (start, stop, restart,
//     pause, console, VNC, port-forward, guest agent queries) as an
//     aggregated API server; virtapi/webconsole the web console it serves.
//   - vmctl: the command line (KubeVirt's virtctl commands) on cobra and
//     cli-runtime, and a client of the subresource API.
//   - version: the build's version in KubeVirt's version.Info shape.
//   - cmd/...: the binaries, flags and wiring only.
//
// Importing vmapi, vmcontrol, podtemplate, domainxml or installstrategy never
// pulls in cgo or libvirt; a test in this package guards that.
package vmkit
