package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/testenv/hostsetup"
)

// NodeName is the name the kubelet of [Options.Node] registers (the
// first node's, when [NodeOptions.Nodes] asks for more).
const NodeName = "localhost"

// NodeNameAt is the name of the cluster's node i (from 0): [NodeName] for
// the first, localhost-2, localhost-3, ... for the others.
func NodeNameAt(i int) string {
	if i == 0 {
		return NodeName
	}
	return NodeName + "-" + strconv.Itoa(i+1)
}

// Host paths a node owns while it runs. Only one cluster can run on a
// machine at a time: the node agent's DaemonSet mounts these exact paths.
// The first node owns the host's; every other node of the cluster sees its
// own directories at the same paths (its own mount namespace, see
// [NodeOptions.Nodes]).
const (
	KubeletRootDir = hostsetup.KubeletRootDir
	nodeMarker     = ".vmkit-node" // in KubeletRootDir: the directory is ours
	nodeTimeout    = 90 * time.Second
	kubepodsCgroup = "kubepods"
	containerdSock = "containerd.sock"
)

// rootSharedMarker, in KubeletRootDir, records that the node made the root
// mount shared (pods may mount host paths with Bidirectional propagation,
// as the node agent does, only from shared mounts; containerd checks the
// path as written, so bind mounts below a symbolic link such as /var/run do
// not help) and must make it private again.
const rootSharedMarker = ".vmkit-root-shared"

// hostDirs are created by the node's pods (hostPath DirectoryOrCreate) and
// removed when the node stops, if they did not exist before.
var hostDirs = []string{"/var/run/kubevirt", "/var/run/kubevirt-private"}

// podLogDirs are where the kubelet keeps its containers' logs (fixed paths,
// made by the first node's kubelet and left as any kubelet leaves them).
var podLogDirs = []string{"/var/log/pods", "/var/log/containers"}

// NodeOptions makes Start also run a node: containerd and runc from the
// host's packages, a kubelet registering Node [NodeName], a pod network
// ([PodCIDR] on bridge [PodBridge]) and kube-proxy for Services.
type NodeOptions struct {
	// Images are image archives (what `docker save` writes) pushed to the
	// cluster's registry before the kubelets start (see Env.Registry): the
	// nodes' containerd pulls every image from there. A pause image tagged
	// registry.k8s.io/pause:3.10 must be among them, or already in the
	// registry: the kubelet's pod sandboxes use it.
	Images []string
	// RegistryDir holds the registry's blobs (default <module
	// root>/_output/registry). It outlives the cluster, so that the next
	// cluster's push sends only the layers that changed.
	RegistryDir string
	// Nodes is how many nodes run on this machine (default 1; at most
	// [MaxNodes]). Every node has its own containerd, kubelet (its own
	// ports), cgroup root, pod network on its own bridge and directories;
	// node i registers as NodeNameAt(i). The first node runs in the host's
	// mount namespace and owns /var/lib/kubelet as with one node; each
	// other one runs its containerd and kubelet in a mount namespace of
	// its own where its directories are bind-mounted over
	// /var/lib/kubelet, /var/run/kubevirt, /var/run/kubevirt-private,
	// /var/log/pods and /var/log/containers, so that the kubelet,
	// containerd and the host paths of its pods (the node agent's
	// included) are that node's (every kubelet also removes the log
	// directories of pods it does not know). The network namespace is the
	// host's for all: one kube-proxy serves every node.
	Nodes int
	// CPUManager runs the kubelets with the static CPU manager policy and
	// 100m of CPU reserved for the kubelet (kubeReserved), which keeps CPU
	// 0 out of exclusive use, so a Guaranteed pod asking for whole CPUs
	// gets CPUs of its own, as VMIs with dedicated CPU placement need. It
	// takes a machine of at least two CPUs.
	CPUManager bool
	// Multus puts Multus' thin CNI plugin in front of every node's pod
	// network, so pods (and VMIs) attach secondary networks from
	// NetworkAttachmentDefinitions, whose CRD it installs (see
	// MultusUser). It needs the plugin built (hack/build-multus.sh).
	Multus bool
	// HugePages2Mi sizes the host's pool of 2 MiB huge pages
	// (vm.nr_hugepages) while the nodes run, so the kubelets advertise
	// hugepages-2Mi; the pool gets its earlier size back when the nodes
	// stop. The pool is the host's: every node advertises all of it.
	HugePages2Mi int
}

// MaxNodes bounds NodeOptions.Nodes (the nodes' kubelet ports and pod
// networks are numbered).
const MaxNodes = 4

// Node is a running containerd and kubelet.
type Node struct {
	// Name is the Node's name (NodeNameAt(Index)).
	Name string
	// Index is the node's place in Env.Nodes.
	Index int
	// ContainerdSocket is containerd's address, for `ctr -a`.
	ContainerdSocket string
	// StorageDir is the node's local storage, a directory under its run
	// directory (NodeStorageDirAt): internal/cluster keeps its volumes
	// there and the backing files of the node's block devices
	// (hostsetup.AttachLoop). It goes when the node stops, after the loop devices
	// over files in it or under the kubelet's directory are detached.
	StorageDir string
	// PodCIDR is the node's pod network, PodGateway the host's address on
	// it, on bridge PodBridge; PodCIDR6 and PodGateway6 are its IPv6
	// counterparts.
	PodCIDR, PodGateway, PodBridge string
	PodCIDR6, PodGateway6          string
	// KubeletRootDir is, as this process sees it, the directory the
	// node's kubelet and pods see at /var/lib/kubelet: that path itself
	// for the first node, a directory in the node's run directory for the
	// others (see HostPath).
	KubeletRootDir string

	dir        string
	lock       *os.File
	containerd *process
	kubelet    *process
	kubeProxy  *process
	created    []string // host directories the node created
	rootShared bool     // the node made / shared

	// The nodes after the first.
	mountNS     *process          // holds the node's mount namespace
	binds       map[string]string // host path as the node sees it -> its directory
	cgroupRoot  string            // the kubelet's cgroup root (under every hierarchy), "" for /
	networkName string            // the CNI network's name (host-local's directory)
}

// NodeStorageDir is the StorageDir of the first node of the cluster whose
// control plane has the run directory runDir (Env.Dir), for a process that
// reaches a node another process runs.
func NodeStorageDir(runDir string) string {
	return NodeStorageDirAt(runDir, 0)
}

// NodeStorageDirAt is the StorageDir of node i (from 0) of the cluster
// whose control plane has the run directory runDir.
func NodeStorageDirAt(runDir string, i int) string {
	return filepath.Join(nodeDir(runDir, i), "storage")
}

// nodeDir is node i's directory in the run directory: node, node-2, ...
func nodeDir(runDir string, i int) string {
	if i == 0 {
		return filepath.Join(runDir, "node")
	}
	return filepath.Join(runDir, "node-"+strconv.Itoa(i+1))
}

// Kubelet ports: the first node's are the kubelet's defaults, node i's are
// 10*i above.
const (
	kubeletPort        = 10250
	kubeletHealthzPort = 10248
	nodePortStep       = 10
)

// nodeCgroupPrefix names the cgroup root of the nodes after the first
// (vmkit-node-localhost-2); the first node's pods are in /kubepods.
const nodeCgroupPrefix = "vmkit-node-"

// newNode lays out node i of a cluster of count nodes whose control plane
// runs in runDir.
func newNode(runDir string, i int) *Node {
	n := &Node{
		Name:           NodeNameAt(i),
		Index:          i,
		dir:            nodeDir(runDir, i),
		PodCIDR:        fmt.Sprintf("10.244.%d.0/24", i),
		PodGateway:     fmt.Sprintf("10.244.%d.1", i),
		PodCIDR6:       fmt.Sprintf("fd00:10:244:%x::/64", i),
		PodGateway6:    fmt.Sprintf("fd00:10:244:%x::1", i),
		PodBridge:      hostsetup.BridgePrefix + strconv.Itoa(i),
		KubeletRootDir: KubeletRootDir,
		networkName:    hostsetup.PodNetworkName,
	}
	n.ContainerdSocket = filepath.Join(n.dir, containerdSock)
	n.StorageDir = NodeStorageDirAt(runDir, i)
	if i > 0 {
		n.networkName = hostsetup.PodNetworkName + "-" + strconv.Itoa(i+1)
		n.cgroupRoot = nodeCgroupPrefix + n.Name
		n.KubeletRootDir = filepath.Join(n.dir, "kubelet")
		n.binds = map[string]string{KubeletRootDir: n.KubeletRootDir}
		for _, d := range hostDirs {
			n.binds[d] = filepath.Join(n.dir, "run", filepath.Base(d))
		}
		// Every kubelet removes the directories of pods it does not know
		// from these (container log garbage collection).
		for _, d := range podLogDirs {
			n.binds[d] = filepath.Join(n.dir, "log", filepath.Base(d))
		}
	}
	return n
}

// HostPath returns where this process finds path as the node's kubelet,
// containerd and pods see it (a host path of a pod, a file under the
// kubelet's directory): path itself on the first node; on the others the
// node's own directory for paths under /var/lib/kubelet, /var/run/kubevirt,
// /var/run/kubevirt-private, /var/log/pods and /var/log/containers.
func (n *Node) HostPath(path string) string {
	for seen, dir := range n.binds {
		if hostsetup.Under(path, seen) {
			return dir + strings.TrimPrefix(path, seen)
		}
	}
	return path
}

// MountNamespacePID is a process in the node's mount namespace (for
// `nsenter -t PID -m`), 0 for the first node, which runs in this
// process's.
func (n *Node) MountNamespacePID() int {
	if n.mountNS == nil {
		return 0
	}
	return n.mountNS.cmd.Process.Pid
}

// pauseImage is the sandbox image the kubelet and containerd use.
const pauseImage = "registry.k8s.io/pause:3.10"

func nodeInstallHint(what string) string {
	return fmt.Sprintf("%s is missing: install it with `apt-get install -y containerd runc containernetworking-plugins nftables` (hack/setup-node.sh, run by `make test-deps`)", what)
}

// startNodes starts the nodes' containerd and kubelet against the running
// control plane, the nodes after the first in their own mount namespaces,
// waits until every Node is Ready, then starts kube-proxy.
func (e *Env) startNodes(ctx context.Context, p *pki, opts *NodeOptions, bins map[string]string) error {
	bins = maps.Clone(bins)
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			return errors.New(nodeInstallHint(bin))
		}
	}
	count := max(opts.Nodes, 1)
	if count > 1 {
		for _, bin := range []string{"unshare", "nsenter", "sleep"} {
			path, err := exec.LookPath(bin)
			if err != nil {
				return fmt.Errorf("%s is missing: a node after the first runs in its own mount namespace: install it with `apt-get install -y util-linux coreutils`", bin)
			}
			bins[bin] = path
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("a node needs root (containerd, kubelet and mounts)")
	}
	for i := range count {
		n := newNode(e.Dir, i)
		if i == 0 {
			n.lock, e.nodeLock = e.nodeLock, nil
			e.Node = n
		}
		e.Nodes = append(e.Nodes, n)
		// In order: the others' mount namespaces copy the first's shared
		// root and the directories it made.
		if err := e.prepareNode(ctx, n, bins); err != nil {
			return err
		}
		if i == 0 && opts.HugePages2Mi > 0 {
			if err := hostsetup.ReserveHugePages(opts.HugePages2Mi); err != nil {
				return err
			}
		}
		if err := n.writeConfig(p, e.Config.Host, count, opts); err != nil {
			return err
		}
	}
	if opts.Multus {
		if err := e.installMultusAPI(ctx); err != nil {
			return err
		}
	}
	if err := e.startRegistry(ctx, opts); err != nil {
		return err
	}
	// The nodes start side by side: most of a node's start is waiting for
	// its kubelet.
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i, n := range e.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.runNode(ctx, n, opts, bins, count)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// kube-proxy reads its Node's addresses at start: after the kubelet
	// registered it.
	n := e.Node
	var err error
	if n.kubeProxy, err = e.startProcess("kube-proxy", bins["kube-proxy"], "--config="+filepath.Join(n.dir, "kube-proxy.yaml")); err != nil {
		return err
	}
	if err := poll(ctx, n.kubeProxy, "kube-proxy healthy", func(ctx context.Context) (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+kubeProxyHealthz+"/healthz", nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status + ": " + string(body)
	}); err != nil {
		return err
	}
	// Pods reach kube-apiserver through the kubernetes Service: wait until
	// kube-proxy routes it, so that no pod starts before it can.
	kubernetesService := net.JoinHostPort(serviceClusterIP, "443")
	if err := poll(ctx, n.kubeProxy, "the kubernetes Service "+kubernetesService+" routed", func(ctx context.Context) (bool, string) {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", kubernetesService)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	}); err != nil {
		return err
	}
	return e.startDNS(ctx, n)
}

// prepareNode makes the node's directories and mounts: for the first node
// the host's (prepareHost); for the others their cgroup root, their pod
// network's bridge (the kubelet listens on its gateway) and a mount
// namespace of their own, held by a process that sleeps until the node
// stops, with the node's directories bind-mounted over the host paths its
// pods see (Node.HostPath). That namespace is a slave of the host's (mounts
// and unmounts of the host reach it, its own never reach the host) and
// shared in itself, for the node agent's Bidirectional mounts.
func (e *Env) prepareNode(ctx context.Context, n *Node, bins map[string]string) error {
	if n.Index == 0 {
		return n.prepareHost()
	}
	for _, d := range append(append([]string{filepath.Join(n.dir, "cni"), n.StorageDir}, slices.Collect(maps.Values(n.binds))...), podLogDirs...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := hostsetup.CreateCgroup(n.cgroupRoot); err != nil {
		return err
	}
	if err := hostsetup.CreateBridge(n.PodBridge, n.PodGateway, n.PodCIDR, n.PodGateway6, n.PodCIDR6); err != nil {
		return err
	}
	var err error
	if n.mountNS, err = e.startProcess("mountns-"+n.Name, bins["unshare"], "--mount", "--propagation", "slave", "--", bins["sleep"], "infinity"); err != nil {
		return err
	}
	sleep := hostsetup.Resolve(bins["sleep"])
	if err := poll(ctx, n.mountNS, "the mount namespace of node "+n.Name, func(context.Context) (bool, string) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", n.MountNamespacePID()))
		return err == nil && exe == sleep, "running " + exe
	}); err != nil {
		return err
	}
	mounts := [][]string{}
	for _, seen := range slices.Sorted(maps.Keys(n.binds)) {
		mounts = append(mounts, []string{"--bind", n.binds[seen], seen})
	}
	mounts = append(mounts, []string{"--make-rshared", "/"})
	for _, args := range mounts {
		cmd := append([]string{"--target", strconv.Itoa(n.MountNamespacePID()), "--mount", "--", "mount"}, args...)
		if out, err := exec.CommandContext(ctx, bins["nsenter"], cmd...).CombinedOutput(); err != nil {
			return fmt.Errorf("node %s: nsenter %s: %v: %s", n.Name, strings.Join(cmd, " "), err, out)
		}
	}
	return nil
}

// inNode returns the command line that runs bin with args in the node's
// mount namespace.
func (n *Node) inNode(bins map[string]string, bin string, args ...string) (string, []string) {
	if n.mountNS == nil {
		return bin, args
	}
	return bins["nsenter"], append([]string{"--target", strconv.Itoa(n.MountNamespacePID()), "--mount", "--", bin}, args...)
}

// procName names a process of the node: as it is for the first node
// (containerd.log, kubelet.log), with the node's name for the others.
func (n *Node) procName(name string) string {
	if n.Index == 0 {
		return name
	}
	return name + "-" + n.Name
}

// runNode starts the node's containerd, imports the images, starts its
// kubelet and waits until its Node is Ready.
func (e *Env) runNode(ctx context.Context, n *Node, opts *NodeOptions, bins map[string]string, count int) error {
	containerdBin, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	bin, args := n.inNode(bins, containerdBin, "--config", filepath.Join(n.dir, "containerd.toml"))
	if n.containerd, err = e.startProcess(n.procName("containerd"), bin, args...); err != nil {
		return err
	}
	if err := poll(ctx, n.containerd, "containerd", func(ctx context.Context) (bool, string) {
		out, err := exec.CommandContext(ctx, "ctr", "-a", n.ContainerdSocket, "version").CombinedOutput()
		return err == nil, string(out)
	}); err != nil {
		return err
	}
	kubeletArgs := []string{
		"--config=" + filepath.Join(n.dir, "kubelet-config.yaml"),
		"--kubeconfig=" + filepath.Join(n.dir, "kubelet.kubeconfig"),
		"--hostname-override=" + n.Name,
		"--root-dir=" + KubeletRootDir,
	}
	if count > 1 {
		// kube-apiserver reaches each kubelet at its InternalIP (their
		// names do not resolve), the node's pod gateway, where it listens.
		kubeletArgs = append(kubeletArgs, "--node-ip="+n.PodGateway)
	}
	bin, args = n.inNode(bins, bins["kubelet"], kubeletArgs...)
	if n.kubelet, err = e.startProcess(n.procName("kubelet"), bin, args...); err != nil {
		return err
	}
	return poll(ctx, n.kubelet, "Node "+n.Name+" Ready", func(ctx context.Context) (bool, string) {
		node, err := e.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition yet"
	})
}
