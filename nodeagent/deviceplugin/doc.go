// Package deviceplugin advertises the host devices that launcher pods request
// (devices.kubevirt.io/kvm, tun and vhost-net) to the kubelet through its
// device plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), as
// KubeVirt's virt-handler does, so that the scheduler can place launcher pods
// and the kubelet hands the device nodes to their compute containers.
//
// [Run] serves one plugin per resource whose device node exists on the host:
// a DevicePlugin gRPC server on a unix socket in the kubelet's device plugins
// directory (kubevirt-<name>.sock), registered with the kubelet at
// <dir>/kubelet.sock. Each plugin advertises [Config.Count] identical devices
// (the device node is shared, not partitioned), all Healthy while the device
// node exists and Unhealthy when it disappears. Allocate maps the device node
// into the container read-write.
//
// The kubelet deletes every plugin socket when it restarts; each plugin
// notices that its socket is gone (or that kubelet.sock was re-created),
// serves a new one and registers again. A kubelet that is not up yet is
// retried, never an error. Run removes its sockets when its context ends.
package deviceplugin
