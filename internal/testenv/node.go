package testenv

import (
	"bufio"
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/registry"
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
	KubeletRootDir = "/var/lib/kubelet"
	nodeLockFile   = "/run/vmkit-node.lock"
	nodeMarker     = ".vmkit-node" // in KubeletRootDir: the directory is ours
	nodeTimeout    = 90 * time.Second
	// nodeLockWait bounds how long a test waits for another test's node.
	nodeLockWait   = 15 * time.Minute
	cgroupRoot     = "/sys/fs/cgroup"
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

// Pod network of the node: the CNI bridge plugin with host-local IPAM on a
// node-local bridge. The range is private to the machine: the host has no
// route out for it and does not forward, so no pod traffic leaves the
// machine. kube-proxy (nftables mode) routes ClusterIP Services.
//
// These are the first node's; node i (from 0) has 10.244.i.0/24 with the
// gateway 10.244.i.1 on bridge vmkit-cni<i>. The host routes between the
// nodes' bridges, so pods on different nodes reach each other by their
// addresses, without NAT.
const (
	PodCIDR        = "10.244.0.0/24"
	PodGateway     = "10.244.0.1"
	PodBridge      = "vmkit-cni0"
	podNetworkName = "vmkit-pods"
	// ClusterPodCIDR holds every node's PodCIDR.
	ClusterPodCIDR = "10.244.0.0/16"
	// hostLocalRoot is where host-local IPAM keeps the nodes' allocations,
	// in a directory named as the node's network.
	hostLocalRoot     = "/var/lib/cni/networks"
	hostLocalDir      = hostLocalRoot + "/" + podNetworkName
	kubeProxyHealthz  = "127.0.0.1:10256"
	kubeProxyMetrics  = "127.0.0.1:10249"
	kubeProxyUser     = "system:kube-proxy" // bound to system:node-proxier by default
	kubeProxyNFTTable = "kube-proxy"
	// sandboxNetnsDir is where containerd pins pod sandboxes' namespaces.
	sandboxNetnsDir = "/run/netns"
	// cniCacheDir is where libcni (in containerd) keeps each sandbox's
	// ADD result, as <network>-<sandbox id>-<interface>, until its DEL,
	// which a stopped node never runs.
	cniCacheDir = "/var/lib/cni/results"
)

// cniCacheEntry is a libcni cache file of a vmkit pod network: the
// network, the sandbox's ID.
var cniCacheEntry = regexp.MustCompile(`^(` + regexp.QuoteMeta(podNetworkName) + `(?:-[0-9]+)?)-([0-9a-f]{64})-[^-]+$`)

// cniCacheFiles are the libcni cache files of the sandboxes on network
// (every vmkit pod network when it is ""): the network's and the loopback
// network's of the same sandboxes.
func cniCacheFiles(network string) []string {
	entries, _ := os.ReadDir(cniCacheDir)
	var files []string
	for _, e := range entries {
		m := cniCacheEntry.FindStringSubmatch(e.Name())
		if m == nil || (network != "" && m[1] != network) {
			continue
		}
		files = append(files, filepath.Join(cniCacheDir, e.Name()))
		if lo := filepath.Join(cniCacheDir, "cni-loopback-"+m[2]+"-lo"); exists(lo) {
			files = append(files, lo)
		}
	}
	return files
}

// removeCNICache removes the libcni cache files of network's sandboxes
// (every vmkit pod network's when it is "").
func removeCNICache(network string) error {
	var errs []error
	for _, f := range cniCacheFiles(network) {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

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
	// (AttachLoop). It goes when the node stops, after the loop devices
	// over files in it or under the kubelet's directory are detached.
	StorageDir string
	// PodCIDR is the node's pod network, PodGateway the host's address on
	// it, on bridge PodBridge.
	PodCIDR, PodGateway, PodBridge string
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
		PodBridge:      "vmkit-cni" + strconv.Itoa(i),
		KubeletRootDir: KubeletRootDir,
		networkName:    podNetworkName,
	}
	n.ContainerdSocket = filepath.Join(n.dir, containerdSock)
	n.StorageDir = NodeStorageDirAt(runDir, i)
	if i > 0 {
		n.networkName = podNetworkName + "-" + strconv.Itoa(i+1)
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
		if under(path, seen) {
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
			if err := reserveHugePages(opts.HugePages2Mi); err != nil {
				return err
			}
		}
		if err := n.writeConfig(p, e.Config.Host, count, opts); err != nil {
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
	if err := createCgroup(n.cgroupRoot); err != nil {
		return err
	}
	if err := createBridge(n.PodBridge, n.PodGateway, n.PodCIDR); err != nil {
		return err
	}
	var err error
	if n.mountNS, err = e.startProcess("mountns-"+n.Name, bins["unshare"], "--mount", "--propagation", "slave", "--", bins["sleep"], "infinity"); err != nil {
		return err
	}
	sleep := resolve(bins["sleep"])
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

// createCgroup creates the cgroup name below the root of every cgroup v1
// hierarchy (or the v2 one) for a kubelet's cgroup root; in the cpuset
// hierarchy it gets its parent's CPUs and memory nodes, without which no
// process can join it.
func createCgroup(name string) error {
	hierarchies := []string{cgroupRoot}
	if !exists(filepath.Join(cgroupRoot, "cgroup.controllers")) {
		hierarchies, _ = filepath.Glob(filepath.Join(cgroupRoot, "*"))
	}
	for _, h := range hierarchies {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			continue
		}
		d := filepath.Join(h, name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
				return fmt.Errorf("creating cgroup %s: %s: %w", d, f, err)
			}
		}
	}
	return nil
}

// startRegistry runs the cluster's OCI registry (internal/registry) on
// registry.DefaultAddr with its blobs in opts.RegistryDir, and pushes
// opts.Images to it.
func (e *Env) startRegistry(ctx context.Context, opts *NodeOptions) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	bin, err := registry.Binary(root)
	if err != nil {
		return err
	}
	dir := opts.RegistryDir
	if dir == "" {
		dir = filepath.Join(root, "_output", "registry")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	addr := registry.DefaultAddr
	if err := registry.Ready(ctx, addr); err == nil {
		return fmt.Errorf("something already answers as a registry on %s: stop it (a cluster of `make demo`? `make demo-down`)", addr)
	}
	cfg := filepath.Join(e.Dir, "registry.yaml")
	if err := registry.WriteConfig(cfg, addr, dir); err != nil {
		return err
	}
	p, err := e.startProcess("registry", bin, "serve", cfg)
	if err != nil {
		return err
	}
	if err := poll(ctx, p, "the registry on "+addr, func(ctx context.Context) (bool, string) {
		err := registry.Ready(ctx, addr)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	e.Registry = addr
	start := time.Now()
	pushed, err := registry.PushArchives(ctx, addr, opts.Images...)
	if err != nil {
		return err
	}
	e.registryPush = fmt.Sprintf("%d images pushed to the registry on %s in %v", len(pushed), addr, time.Since(start).Round(time.Millisecond))
	return nil
}

// lockNode takes the machine-wide node lock, or names who holds it.
func lockNode(runDir string) (*os.File, error) {
	f, err := os.OpenFile(nodeLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	// Test binaries of different packages (go test runs them in parallel)
	// take turns; anything else holding the lock (the demo's cluster) is
	// reported at once.
	deadline := time.Now().Add(nodeLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		holder, _ := os.ReadFile(nodeLockFile)
		if !strings.Contains(string(holder), ".test,") || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another vmkit node runs on this machine (%s); only one can (the kubelet's paths and ports are fixed): stop it first (`make demo-down` for the demo's)",
				strings.TrimSpace(string(holder)))
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%s, pid %d, run dir %s\n", filepath.Base(os.Args[0]), os.Getpid(), runDir)), 0)
	return f, nil
}

// prepareHost creates the node's directories and makes the shared mounts.
func (n *Node) prepareHost() error {
	for _, d := range []string{filepath.Join(n.dir, "cni"), n.StorageDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if entries, err := os.ReadDir(KubeletRootDir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(KubeletRootDir, nodeMarker)); err != nil {
			return fmt.Errorf("%s exists and was not made by a vmkit node: another kubelet owns this machine", KubeletRootDir)
		}
	}
	for _, d := range append(slices.Clone(hostDirs), KubeletRootDir) {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			n.created = append(n.created, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(KubeletRootDir, nodeMarker), nil, 0o644); err != nil {
		return err
	}
	if !rootIsShared() {
		if err := os.WriteFile(filepath.Join(KubeletRootDir, rootSharedMarker), nil, 0o644); err != nil {
			return err
		}
		if err := syscall.Mount("", "/", "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("making / a shared mount: %w", err)
		}
		n.rootShared = true
	}
	return nil
}

// rootIsShared reports whether / is a shared mount (has a shared: tag in
// /proc/self/mountinfo).
func rootIsShared() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 6 && fields[4] == "/" {
			for _, f := range fields[6:] {
				if f == "-" {
					break
				}
				if strings.HasPrefix(f, "shared:") {
					return true
				}
			}
		}
	}
	return false
}

// makeRootPrivate undoes prepareHost's shared root: every mount was
// private before (the node only makes / shared when it was not).
func makeRootPrivate() error {
	if err := syscall.Mount("", "/", "", syscall.MS_PRIVATE|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("making / private again: %w", err)
	}
	return nil
}

// writeConfig writes containerd's and the kubelet's configuration, the
// node's CNI network, the kubelet's kubeconfig with a node client
// certificate and, on the first node, kube-proxy's configuration and
// kubeconfig. count is the number of nodes of the cluster.
func (n *Node) writeConfig(p *pki, server string, count int, opts *NodeOptions) error {
	cniBin := "/usr/lib/cni"
	for _, plugin := range []string{"loopback", "bridge", "host-local"} {
		if _, err := os.Stat(filepath.Join(cniBin, plugin)); err != nil {
			return errors.New(nodeInstallHint("the " + plugin + " CNI plugin (" + cniBin + "/" + plugin + ", package containernetworking-plugins)"))
		}
	}
	containerd := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # No CAP_SYS_RESOURCE on these machines: a negative oom_score_adj fails runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  # Every image comes from the cluster's registry (internal/registry).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = false
`, filepath.Join(n.dir, "containerd-root"), filepath.Join(n.dir, "containerd-state"), n.ContainerdSocket,
		pauseImage, cniBin, filepath.Join(n.dir, "cni"), filepath.Join(n.dir, "certs.d"))
	if err := registry.WriteHostsConfig(filepath.Join(n.dir, "certs.d"), registry.DefaultAddr, registry.Mirrored); err != nil {
		return err
	}
	// One node listens on 127.0.0.1 and kube-apiserver reaches it by its
	// name, localhost; with several, each listens on its pod gateway (its
	// InternalIP, --node-ip) on ports of its own.
	listen := "address: 127.0.0.1\nhealthzBindAddress: 127.0.0.1\n"
	if count > 1 {
		listen = fmt.Sprintf("address: %s\nport: %d\nhealthzBindAddress: 127.0.0.1\nhealthzPort: %d\n",
			n.PodGateway, kubeletPort+nodePortStep*n.Index, kubeletHealthzPort+nodePortStep*n.Index)
	}
	if n.cgroupRoot != "" {
		listen += "cgroupRoot: /" + n.cgroupRoot + "\n"
	}
	if opts.CPUManager {
		if runtime.NumCPU() < 2 {
			return fmt.Errorf("NodeOptions.CPUManager: the static CPU manager policy keeps one CPU for the system and this machine has %d CPU", runtime.NumCPU())
		}
		// The policy needs some CPU reserved; it keeps the first whole
		// CPU (CPU 0) out of exclusive use, while allocatable loses only
		// the 100m: a pod asking for a whole CPU plus its helpers' few
		// millicores still fits on a machine of two.
		listen += "cpuManagerPolicy: static\nkubeReserved: {cpu: 100m}\n"
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
%sreadOnlyPort: 0
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: %q}}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
failSwapOn: false
resolvConf: /etc/resolv.conf
clusterDNS: [%q]
clusterDomain: %s
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
serializeImagePulls: false
# kube-proxy owns the node's packet filter; the kubelet's iptables chains
# (KUBE-FIREWALL, canaries) would outlive the node.
makeIPTablesUtilChains: false
`, listen, p.caCertFile, n.ContainerdSocket, ClusterDNSIP, ClusterDomain)
	// containerd sets up each sandbox's loopback itself and uses the first
	// network configuration in conf_dir.
	podNetwork := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [{
  "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
}]}
`, n.networkName, n.PodBridge, n.PodCIDR, n.PodGateway)
	files := map[string]string{
		"containerd.toml":            containerd,
		"kubelet-config.yaml":        kubelet,
		"cni/10-vmkit-pods.conflist": podNetwork,
	}
	if n.Index == 0 {
		clusterCIDR := PodCIDR
		if count > 1 {
			clusterCIDR = ClusterPodCIDR
		}
		files["kube-proxy.yaml"] = fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %q
mode: nftables
clusterCIDR: %q
healthzBindAddress: %q
metricsBindAddress: %q
# Leave the host's conntrack limits alone (these machines cannot raise them).
conntrack: {maxPerCore: 0, min: 0}
`, filepath.Join(n.dir, "kube-proxy.kubeconfig"), n.Name, clusterCIDR, kubeProxyHealthz, kubeProxyMetrics)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	// The Node authorizer knows the kubelet by its certificate's subject.
	user := "system:node:" + n.Name
	cert, key, err := p.clientCert(pkix.Name{CommonName: user, Organization: []string{"system:nodes"}})
	if err != nil {
		return fmt.Errorf("kubelet certificate: %w", err)
	}
	if err := writeKubeconfig(filepath.Join(n.dir, "kubelet.kubeconfig"), server, p.caCertPEM, user, cert, key); err != nil {
		return err
	}
	if n.Index > 0 {
		return nil
	}
	cert, key, err = p.clientCert(pkix.Name{CommonName: kubeProxyUser})
	if err != nil {
		return fmt.Errorf("kube-proxy certificate: %w", err)
	}
	return writeKubeconfig(filepath.Join(n.dir, "kube-proxy.kubeconfig"), server, p.caCertPEM, kubeProxyUser, cert, key)
}

// nodeAPIServerArgs are kube-apiserver's flags for reaching the kubelet
// (logs, exec, port-forward): by host name, with a client certificate.
// With several nodes it reaches each at its InternalIP (see writeConfig).
func nodeAPIServerArgs(p *pki, dir string, count int) ([]string, error) {
	cert, key, err := p.clientCert(pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{mastersGroup}})
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	addressType := "Hostname"
	if count > 1 {
		addressType = "InternalIP"
	}
	p.kubeletClientCertFile = filepath.Join(dir, "kubelet-client.crt")
	p.kubeletClientKeyFile = filepath.Join(dir, "kubelet-client.key")
	if err := os.WriteFile(p.kubeletClientCertFile, cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.kubeletClientKeyFile, key, 0o600); err != nil {
		return nil, err
	}
	return []string{
		"--kubelet-client-certificate=" + p.kubeletClientCertFile,
		"--kubelet-client-key=" + p.kubeletClientKeyFile,
		"--kubelet-preferred-address-types=" + addressType,
	}, nil
}

// stop ends the kubelet, every pod's processes, the containerd shims and
// containerd, then removes the node's mounts and directories. The nodes
// after the first stop before it (Env.stop).
func (n *Node) stop() error {
	if n.kubeProxy != nil {
		n.kubeProxy.stop(stopGrace)
	}
	if n.kubelet != nil {
		n.kubelet.stop(stopGrace)
	}
	if n.Index > 0 {
		return n.stopOther()
	}
	err := errors.Join(killCgroup(kubepodsCgroup), killShims(n.ContainerdSocket), removePodNetwork())
	if n.containerd != nil {
		n.containerd.stop(stopGrace)
	}
	// containerd, cleaning up the tasks whose shims died, starts
	// `containerd-shim-runc-v2 ... delete` processes that outlive it.
	err = errors.Join(err, killShims(n.ContainerdSocket))
	// Block volumes: the kubelet's loop devices and those over files in StorageDir.
	err = errors.Join(err, detachLoops(func(backing string) bool {
		return under(backing, resolve(n.dir)) || under(backing, resolve(KubeletRootDir))
	}))
	err = errors.Join(err, unmountUnder(n.dir), unmountUnder(KubeletRootDir+"/"), unmountUnder("/var/run/kubevirt"))
	if n.rootShared {
		err = errors.Join(err, makeRootPrivate())
	}
	err = errors.Join(err, removeCgroup(kubepodsCgroup), restoreHugePages())
	for _, d := range n.created {
		err = errors.Join(err, os.RemoveAll(d))
	}
	if !slices.Contains(n.created, KubeletRootDir) {
		// Ours (the marker says so) but older than this node: keep the directory, drop its contents.
		err = errors.Join(err, removeContents(KubeletRootDir))
	}
	return err
}

// unlock releases the node lock the first node holds.
func (n *Node) unlock() {
	if n.lock != nil {
		_ = n.lock.Truncate(0)
		n.lock.Close()
		n.lock = nil
	}
}

// leftovers reports what the stopped nodes left on the host: their
// bridges, host-local allocations, libcni cache files, cgroups, mounts
// (under their directories and the kubelet's), pinned sandbox network
// namespaces, kube-proxy's nftables table, processes of their directories
// (containerd, kubelets, shims) and loop devices over their files.
// Env.stop checks this while it still holds the node lock: the next
// cluster may start the moment it lets go, and its bridge would look like
// ours.
func (e *Env) leftovers() error {
	var left []string
	dirs := []string{resolve(KubeletRootDir) + "/"}
	for _, n := range e.Nodes {
		if exists("/sys/class/net/" + n.PodBridge) {
			left = append(left, "bridge "+n.PodBridge)
		}
		if exists(filepath.Join(hostLocalRoot, n.networkName)) {
			left = append(left, "host-local allocations "+filepath.Join(hostLocalRoot, n.networkName))
		}
		if files := cniCacheFiles(n.networkName); len(files) > 0 {
			left = append(left, "CNI cache files "+strings.Join(files, " "))
		}
		cgroup := kubepodsCgroup
		if n.cgroupRoot != "" {
			cgroup = n.cgroupRoot
		}
		if cg := cgroupDirs(cgroup); len(cg) > 0 {
			left = append(left, "cgroups "+strings.Join(cg, " "))
		}
		dirs = append(dirs, resolve(n.dir)+"/")
	}
	for _, d := range dirs {
		if mps := mountPoints(d); len(mps) > 0 {
			left = append(left, "mounts "+strings.Join(mps, " "))
		}
	}
	if pinned, _ := filepath.Glob(filepath.Join(sandboxNetnsDir, "cni-*")); len(pinned) > 0 {
		left = append(left, "sandbox network namespaces "+strings.Join(pinned, " "))
	}
	if exec.Command("nft", "list", "table", "ip", kubeProxyNFTTable).Run() == nil {
		left = append(left, "nftables table ip "+kubeProxyNFTTable)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, d := range dirs[1:] {
			if strings.Contains(string(data), d) {
				left = append(left, "process "+filepath.Base(filepath.Dir(p))+" ("+strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " ")+")")
				break
			}
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		data, _ := os.ReadFile(l)
		backing := strings.TrimSpace(string(data))
		for _, d := range dirs[1:] {
			if strings.HasPrefix(backing, d) {
				left = append(left, "loop device "+filepath.Base(filepath.Dir(filepath.Dir(l)))+" over "+backing)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// stopOther is stop for a node after the first: its pods, shims and
// containerd go, then the loop devices its kubelet attached (named by their
// path in the node's mount namespace, /var/lib/kubelet/...) and those over
// its storage; the process holding its mount namespace ends, which takes
// every mount of the node with it; its bridge, host-local's allocations,
// cgroup root and directory go last.
func (n *Node) stopOther() error {
	err := errors.Join(killCgroup(n.cgroupRoot), killShims(n.ContainerdSocket))
	if n.containerd != nil {
		n.containerd.stop(stopGrace)
	}
	err = errors.Join(err, killShims(n.ContainerdSocket)) // the shims' `delete` runs containerd started (stop)
	err = errors.Join(err, detachLoops(func(backing string) bool {
		return under(backing, resolve(n.dir)) || under(backing, KubeletRootDir)
	}))
	if n.mountNS != nil {
		n.mountNS.stop(stopGrace)
	}
	return errors.Join(err, removeBridge(n.PodBridge), os.RemoveAll(filepath.Join(hostLocalRoot, n.networkName)),
		removeCNICache(n.networkName), removeCgroup(n.cgroupRoot), os.RemoveAll(n.dir))
}

// CleanupNode removes what a node killed before it could stop leaves
// behind: pod processes, containerd shims of testenv's containerd sockets,
// mounts under the kubelet's root directory and the shared bind mounts. It
// must only be called while holding the node lock (a running node would be
// destroyed); startNode calls it.
func CleanupNode() error {
	// The pods of the nodes after the first, in their cgroup roots; the
	// processes holding their mount namespaces died with the process that
	// started them, and the namespaces (and every mount of those nodes)
	// die with the last of their pods and shims.
	var otherNodes []string
	for _, d := range cgroupDirs(nodeCgroupPrefix + "*") {
		otherNodes = append(otherNodes, filepath.Base(d))
	}
	slices.Sort(otherNodes)
	otherNodes = slices.Compact(otherNodes)
	err := killCgroup(kubepodsCgroup)
	for _, name := range otherNodes {
		err = errors.Join(err, killCgroup(name))
	}
	err = errors.Join(err, killShims(""), removePodNetwork())
	for _, name := range otherNodes {
		err = errors.Join(err, removeCgroup(name))
	}
	// Loop devices of a dead node's block volumes: over files in its
	// storage directory, or attached by its kubelet.
	runDirs := filepath.Join(resolve(os.TempDir()), "vmkit-testenv-")
	err = errors.Join(err, detachLoops(func(backing string) bool {
		return (strings.HasPrefix(backing, runDirs) && nodeDirPattern.MatchString(backing)) || under(backing, resolve(KubeletRootDir))
	}))
	// containerd's sandboxes and root file systems of the dead nodes' run
	// directory, then the nodes' directories (containerd's images, the
	// kubelet's directories of the nodes after the first: gigabytes). Their
	// control plane's files are left to the OS's temp cleanup. Only a
	// cluster holding the node lock has node directories, so every one
	// found is a dead cluster's.
	for _, mp := range mountPoints(runDirs) {
		if nodeDirPattern.MatchString(mp) {
			err = errors.Join(err, unmount(mp))
		}
	}
	deadNodes, _ := filepath.Glob(runDirs + "*/node")
	others, _ := filepath.Glob(runDirs + "*/node-[0-9]*")
	for _, dir := range append(deadNodes, others...) {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	if _, serr := os.Stat(filepath.Join(KubeletRootDir, nodeMarker)); serr != nil {
		return err // the kubelet's directory is clean
	}
	err = errors.Join(err, unmountUnder(KubeletRootDir+"/"), unmountUnder("/var/run/kubevirt"))

	if _, serr := os.Stat(filepath.Join(KubeletRootDir, rootSharedMarker)); serr == nil {
		err = errors.Join(err, makeRootPrivate())
	}
	err = errors.Join(err, removeCgroup(kubepodsCgroup), restoreHugePages(), removeContents(KubeletRootDir))
	return err
}

// nodeDirPattern finds a node's directory in a path of its run directory:
// /node/ for the first, /node-2/ and on for the others.
var nodeDirPattern = regexp.MustCompile(`/node(-[0-9]+)?/`)

// killCgroup SIGKILLs every process in the named cgroup, and below it, of
// every cgroup v1 hierarchy (or the v2 one).
func killCgroup(name string) error {
	dirs := cgroupDirs(name)
	for range 50 {
		found := false
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(path string, entry os.DirEntry, err error) error {
				if err != nil || entry.IsDir() || entry.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						found = true
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if !found {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes are left in the %s cgroups after SIGKILL", name)
}

// cgroupDirs are the directories of the named cgroup in every cgroup v1
// hierarchy, or in the v2 one.
func cgroupDirs(name string) []string {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", name))
	if d := filepath.Join(cgroupRoot, name); exists(d) {
		dirs = append(dirs, d)
	}
	return dirs
}

// removeCgroup removes the (empty) cgroup directories below and of name.
func removeCgroup(name string) error {
	dirs := cgroupDirs(name)
	var errs []error
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(path string, entry os.DirEntry, err error) error {
			if err == nil && entry.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- { // children first
			if err := syscall.Rmdir(all[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", all[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// killShims SIGKILLs the containerd-shim-runc-v2 processes serving the
// containerd at socket, or, with an empty socket, any testenv containerd.
func killShims(socket string) error {
	var killed []string // their /proc/<pid>/cmdline
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		i := slices.Index(args, "-address")
		if i < 0 || i+1 >= len(args) {
			continue
		}
		addr := args[i+1]
		ours := addr == socket || (socket == "" && strings.Contains(addr, "/vmkit-testenv-") && strings.HasSuffix(addr, "/"+containerdSock))
		if !ours {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, p)
		}
	}
	// Until they are gone (a zombie's cmdline is empty), for at most 2 s.
	for deadline := time.Now().Add(2 * time.Second); len(killed) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		killed = slices.DeleteFunc(killed, func(p string) bool {
			data, err := os.ReadFile(p)
			return err != nil || len(data) == 0
		})
	}
	return nil
}

// mountPoints returns the mount points at or under prefix (symbolic links
// resolved, as /proc/self/mountinfo shows them), deepest first.
func mountPoints(prefix string) []string {
	prefix = resolve(prefix)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	// Deepest first, so children go before their parents; a path mounted
	// several times appears several times.
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// unmountUnder unmounts every mount strictly below prefix.
func unmountUnder(prefix string) error {
	var errs []error
	for _, mp := range mountPoints(prefix) {
		if mp == strings.TrimSuffix(resolve(prefix), "/") {
			continue
		}
		if err := unmount(mp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func unmount(path string) error {
	if err := syscall.Unmount(path, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	return nil
}

// resolve returns path with symbolic links resolved (/var/run is /run),
// keeping a trailing slash; a path that does not exist is returned as is.
func resolve(path string) string {
	r, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path
	}
	if strings.HasSuffix(path, "/") && !strings.HasSuffix(r, "/") {
		r += "/"
	}
	return r
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// removeContents removes everything in dir but dir itself.
func removeContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// createPodBridge creates the first node's pod network bridge with the
// gateway address before kube-apiserver starts, so that it can listen
// there; the CNI bridge plugin finds the bridge and its address and keeps
// both.
func createPodBridge() error {
	return createBridge(PodBridge, PodGateway, PodCIDR)
}

// createBridge creates a node's pod network bridge with its gateway address.
func createBridge(bridge, gateway, cidr string) error {
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", gateway + "/" + strings.Split(cidr, "/")[1], "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = removeBridge(bridge)
			return fmt.Errorf("creating the pod network's bridge: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// removeBridge deletes a pod network's bridge if it is there.
func removeBridge(bridge string) error {
	if _, err := os.Stat("/sys/class/net/" + bridge); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting bridge %s: %v: %s", bridge, err, out)
	}
	return nil
}

// removePodNetwork removes what the pod networks of every node and
// kube-proxy leave on the host once every pod is gone: the bridges
// (vmkit-cni0, vmkit-cni1, ...), host-local's allocations, libcni's cache
// of the sandboxes and kube-proxy's nftables tables (kube-proxy does not
// remove them on exit).
func removePodNetwork() error {
	var errs []error
	bridges, _ := filepath.Glob("/sys/class/net/vmkit-cni[0-9]*")
	for _, b := range bridges {
		errs = append(errs, removeBridge(filepath.Base(b)))
	}
	allocations, _ := filepath.Glob(hostLocalDir + "*")
	for _, d := range allocations {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeCNICache(""))
	// containerd pins each sandbox's network namespace at /run/netns/cni-*
	// and removes it only when it tears the sandbox down, which a stopped
	// node never does.
	pinned, _ := filepath.Glob(filepath.Join(sandboxNetnsDir, "cni-*"))
	if len(pinned) > 0 {
		// `ip netns add` (the network tests) bind-mounts /run/netns on
		// itself, hiding pins containerd made before: drop that bind mount
		// (ip makes it again when it needs it) to reach them.
		for range 4 {
			if syscall.Unmount(sandboxNetnsDir, syscall.MNT_DETACH) != nil {
				break
			}
		}
	}
	for _, ns := range pinned {
		// Pinned once by containerd, and again by every copy the shared
		// root's propagation made: unmount until nothing is left.
		for range 16 {
			if syscall.Unmount(ns, syscall.MNT_DETACH) != nil {
				break
			}
		}
		if err := os.Remove(ns); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, family := range []string{"ip", "ip6"} {
		if exec.Command("nft", "list", "table", family, kubeProxyNFTTable).Run() != nil {
			continue // absent (or no nft: then kube-proxy never ran either)
		}
		if out, err := exec.Command("nft", "delete", "table", family, kubeProxyNFTTable).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting nftables table %s %s: %v: %s", family, kubeProxyNFTTable, err, out))
		}
	}
	return errors.Join(errs...)
}
