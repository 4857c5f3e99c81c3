// Package testenv runs a real Kubernetes control plane for integration tests:
// etcd and kube-apiserver, plus kube-controller-manager and kube-scheduler on
// request, all listening on 127.0.0.1 only (kube-apiserver on the pod
// network's gateway when a node runs, below).
//
// The binaries come from the directory named by $KUBEBUILDER_ASSETS, else from
// <module root>/_output/k8s-bin, which `make test-deps` (hack/setup-k8s.sh)
// fills. A missing binary fails the test with a message naming the binary and
// that command; it never skips.
//
// Each call to [Start] is independent: a fresh temporary directory, fresh free
// ports and freshly generated certificates and keys, so tests can run one
// after another (or in parallel) on one machine. The control plane stops
// when the test ends, or earlier through [Env.Stop]:
//
//	func TestWidgets(t *testing.T) {
//		env := testenv.Start(t, testenv.Options{
//			CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()},
//		})
//		_, err := env.Kube.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{})
//		// ...
//	}
//
// Without kube-controller-manager nothing creates a namespace's "default"
// ServiceAccount, so the ServiceAccount admission plugin rejects pods that do
// not name an existing one; set [Options.WithControllerManager] for tests that
// create pods (it also runs garbage collection of owned objects).
//
// [Options.Node] also runs a real node: containerd and runc from the host's
// packages (hack/setup-node.sh) and the kubelet, registering Node
// [NodeName], with image tarballs imported into containerd. It needs root,
// owns /var/lib/kubelet while it runs, and only one runs per machine
// (test binaries wait for each other's); stopping it leaves no process or
// mount behind. The node has a pod network (CNI bridge [PodBridge], pods in
// [PodCIDR]) and kube-proxy; kube-apiserver then listens on the bridge's
// address [PodGateway], a private network the environment creates, and
// publishes it as the endpoint of the kubernetes Service, so pods reach it
// as in any cluster. [NodeOptions.Nodes] runs more nodes on the same
// machine (localhost-2, ...), each with its own containerd, kubelet, ports,
// cgroup root, pod network and, in a mount namespace of its own, its own
// /var/lib/kubelet; pods on different nodes reach each other through the
// host. See docs/cluster.md.
//
// Two subpackages stand apart: hostsetup, the host state a node changes
// and restores (mounts, loop devices for block volumes with
// hostsetup.AttachLoop, cgroups, huge pages, pod network bridges), and
// libvirtenv, a working libvirt and the test guest for tests that need no
// cluster.
package testenv
