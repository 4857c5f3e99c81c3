package testenv

import (
	"bufio"
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeName is the name the kubelet of [Options.Node] registers.
const NodeName = "localhost"

// Host paths a node owns while it runs. Only one node can run on a machine
// at a time: the node agent's DaemonSet mounts these exact paths.
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

// Pod network of the node: the CNI bridge plugin with host-local IPAM on a
// node-local bridge. The range is private to the machine: the host has no
// route out for it and does not forward, so no pod traffic leaves the
// machine. kube-proxy (nftables mode) routes ClusterIP Services.
const (
	PodCIDR        = "10.244.0.0/24"
	PodGateway     = "10.244.0.1"
	PodBridge      = "vmkit-cni0"
	podNetworkName = "vmkit-pods"
	// hostLocalDir is where host-local IPAM keeps the node's allocations.
	hostLocalDir      = "/var/lib/cni/networks/" + podNetworkName
	kubeProxyHealthz  = "127.0.0.1:10256"
	kubeProxyMetrics  = "127.0.0.1:10249"
	kubeProxyUser     = "system:kube-proxy" // bound to system:node-proxier by default
	kubeProxyNFTTable = "kube-proxy"
	// sandboxNetnsDir is where containerd pins pod sandboxes' namespaces.
	sandboxNetnsDir = "/run/netns"
)

// NodeOptions makes Start also run a node: containerd and runc from the
// host's packages, a kubelet registering Node [NodeName], a pod network
// ([PodCIDR] on bridge [PodBridge]) and kube-proxy for Services.
type NodeOptions struct {
	// Images are image tarballs (docker save or OCI layout) imported into
	// containerd's k8s.io namespace before the kubelet starts. A pause
	// image tagged registry.k8s.io/pause:3.10 must be among them: the
	// kubelet's pod sandboxes use it and nothing can pull it.
	Images []string
}

// Node is a running containerd and kubelet.
type Node struct {
	// Name is the Node's name ([NodeName]).
	Name string
	// ContainerdSocket is containerd's address, for `ctr -a`.
	ContainerdSocket string
	// StorageDir is the node's local storage, a directory under its run
	// directory (NodeStorageDir): internal/cluster keeps its volumes there
	// and the backing files of the node's block devices (AttachLoop). It
	// goes when the node stops, after the loop devices over files in it
	// or under the kubelet's directory are detached.
	StorageDir string

	dir        string
	lock       *os.File
	containerd *process
	kubelet    *process
	kubeProxy  *process
	created    []string // host directories the node created
	rootShared bool     // the node made / shared
}

// NodeStorageDir is the StorageDir of the node whose control plane has the
// run directory runDir (Env.Dir), for a process that reaches a node
// another process runs.
func NodeStorageDir(runDir string) string {
	return filepath.Join(runDir, "node", "storage")
}

// pauseImage is the sandbox image the kubelet and containerd use.
const pauseImage = "registry.k8s.io/pause:3.10"

func nodeInstallHint(what string) string {
	return fmt.Sprintf("%s is missing: install it with `apt-get install -y containerd runc containernetworking-plugins nftables` (hack/setup-node.sh, run by `make test-deps`)", what)
}

// startNode starts containerd and the kubelet against the running control
// plane and waits until the Node is Ready.
func (e *Env) startNode(ctx context.Context, p *pki, opts *NodeOptions, bins map[string]string) error {
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			return errors.New(nodeInstallHint(bin))
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("a node needs root (containerd, kubelet and mounts)")
	}
	n := &Node{Name: NodeName, dir: filepath.Join(e.Dir, "node"), lock: e.nodeLock}
	e.Node, e.nodeLock = n, nil
	n.ContainerdSocket = filepath.Join(n.dir, containerdSock)
	n.StorageDir = NodeStorageDir(e.Dir)
	var err error
	if err := n.prepareHost(); err != nil {
		return err
	}
	if err := n.writeConfig(p, e.Config.Host); err != nil {
		return err
	}
	if n.containerd, err = e.startProcess("containerd", "containerd", "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	if err := poll(ctx, n.containerd, "containerd", func(ctx context.Context) (bool, string) {
		out, err := exec.CommandContext(ctx, "ctr", "-a", n.ContainerdSocket, "version").CombinedOutput()
		return err == nil, string(out)
	}); err != nil {
		return err
	}
	if err := n.ImportImages(ctx, opts.Images...); err != nil {
		return err
	}
	if n.kubelet, err = e.startProcess("kubelet", bins["kubelet"],
		"--config="+filepath.Join(n.dir, "kubelet-config.yaml"),
		"--kubeconfig="+filepath.Join(n.dir, "kubelet.kubeconfig"),
		"--hostname-override="+n.Name,
		"--root-dir="+KubeletRootDir,
	); err != nil {
		return err
	}
	if err := poll(ctx, n.kubelet, "Node "+n.Name+" Ready", func(ctx context.Context) (bool, string) {
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
	}); err != nil {
		return err
	}
	// kube-proxy reads its Node's addresses at start: after the kubelet
	// registered it.
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
	return poll(ctx, n.kubeProxy, "the kubernetes Service "+kubernetesService+" routed", func(ctx context.Context) (bool, string) {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", kubernetesService)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
}

// ImportImages imports image tarballs into containerd's k8s.io namespace,
// where the kubelet finds them.
func (n *Node) ImportImages(ctx context.Context, tarballs ...string) error {
	for _, t := range tarballs {
		out, err := exec.CommandContext(ctx, "ctr", "-a", n.ContainerdSocket, "-n", "k8s.io", "images", "import", t).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing image %s: %v: %s", t, err, out)
		}
	}
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
// loopback CNI network and the kubelet's kubeconfig with a node client
// certificate.
func (n *Node) writeConfig(p *pki, server string) error {
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
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = false
`, filepath.Join(n.dir, "containerd-root"), filepath.Join(n.dir, "containerd-state"), n.ContainerdSocket,
		pauseImage, cniBin, filepath.Join(n.dir, "cni"))
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: %q}}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
failSwapOn: false
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
serializeImagePulls: false
# kube-proxy owns the node's packet filter; the kubelet's iptables chains
# (KUBE-FIREWALL, canaries) would outlive the node.
makeIPTablesUtilChains: false
`, p.caCertFile, n.ContainerdSocket)
	// containerd sets up each sandbox's loopback itself and uses the first
	// network configuration in conf_dir.
	podNetwork := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [{
  "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
}]}
`, podNetworkName, PodBridge, PodCIDR, PodGateway)
	kubeProxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %q
mode: nftables
clusterCIDR: %q
healthzBindAddress: %q
metricsBindAddress: %q
# Leave the host's conntrack limits alone (these machines cannot raise them).
conntrack: {maxPerCore: 0, min: 0}
`, filepath.Join(n.dir, "kube-proxy.kubeconfig"), n.Name, PodCIDR, kubeProxyHealthz, kubeProxyMetrics)
	files := map[string]string{
		"containerd.toml":            containerd,
		"kubelet-config.yaml":        kubelet,
		"kube-proxy.yaml":            kubeProxy,
		"cni/10-vmkit-pods.conflist": podNetwork,
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
	cert, key, err = p.clientCert(pkix.Name{CommonName: kubeProxyUser})
	if err != nil {
		return fmt.Errorf("kube-proxy certificate: %w", err)
	}
	return writeKubeconfig(filepath.Join(n.dir, "kube-proxy.kubeconfig"), server, p.caCertPEM, kubeProxyUser, cert, key)
}

// nodeAPIServerArgs are kube-apiserver's flags for reaching the kubelet
// (logs, exec, port-forward): by host name, with a client certificate.
func nodeAPIServerArgs(p *pki, dir string) ([]string, error) {
	cert, key, err := p.clientCert(pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{mastersGroup}})
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
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
		"--kubelet-preferred-address-types=Hostname",
	}, nil
}

// stop ends the kubelet, every pod's processes, the containerd shims and
// containerd, then removes the node's mounts and directories.
func (n *Node) stop() error {
	if n.kubeProxy != nil {
		n.kubeProxy.stop(stopGrace)
	}
	if n.kubelet != nil {
		n.kubelet.stop(stopGrace)
	}
	err := errors.Join(killCgroup(kubepodsCgroup), killShims(n.ContainerdSocket), removePodNetwork())
	if n.containerd != nil {
		n.containerd.stop(stopGrace)
	}
	// Block volumes: the kubelet's loop devices and those over files in StorageDir.
	err = errors.Join(err, detachLoops(func(backing string) bool {
		return under(backing, resolve(n.dir)) || under(backing, resolve(KubeletRootDir))
	}))
	err = errors.Join(err, unmountUnder(n.dir), unmountUnder(KubeletRootDir+"/"), unmountUnder("/var/run/kubevirt"))
	if n.rootShared {
		err = errors.Join(err, makeRootPrivate())
	}
	err = errors.Join(err, removeCgroup(kubepodsCgroup))
	for _, d := range n.created {
		err = errors.Join(err, os.RemoveAll(d))
	}
	if !slices.Contains(n.created, KubeletRootDir) {
		// Ours (the marker says so) but older than this node: keep the directory, drop its contents.
		err = errors.Join(err, removeContents(KubeletRootDir))
	}
	if n.lock != nil {
		_ = n.lock.Truncate(0)
		n.lock.Close()
	}
	return err
}

// CleanupNode removes what a node killed before it could stop leaves
// behind: pod processes, containerd shims of testenv's containerd sockets,
// mounts under the kubelet's root directory and the shared bind mounts. It
// must only be called while holding the node lock (a running node would be
// destroyed); startNode calls it.
func CleanupNode() error {
	err := errors.Join(killCgroup(kubepodsCgroup), killShims(""), removePodNetwork())
	// Loop devices of a dead node's block volumes: over files in its
	// storage directory, or attached by its kubelet.
	runDirs := filepath.Join(resolve(os.TempDir()), "vmkit-testenv-")
	err = errors.Join(err, detachLoops(func(backing string) bool {
		return (strings.HasPrefix(backing, runDirs) && strings.Contains(backing, "/node/")) || under(backing, resolve(KubeletRootDir))
	}))
	// containerd's sandboxes and root file systems of the dead node's run
	// directory (its control plane's files are left to the OS's temp cleanup).
	deadNodes := map[string]bool{}
	for _, mp := range mountPoints(runDirs) {
		if i := strings.Index(mp, "/node/"); i >= 0 {
			err = errors.Join(err, unmount(mp))
			deadNodes[mp[:i+len("/node")]] = true
		}
	}
	for dir := range deadNodes {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	if _, serr := os.Stat(filepath.Join(KubeletRootDir, nodeMarker)); serr != nil {
		return err // the kubelet's directory is clean
	}
	err = errors.Join(err, unmountUnder(KubeletRootDir+"/"), unmountUnder("/var/run/kubevirt"))

	if _, serr := os.Stat(filepath.Join(KubeletRootDir, rootSharedMarker)); serr == nil {
		err = errors.Join(err, makeRootPrivate())
	}
	err = errors.Join(err, removeCgroup(kubepodsCgroup), removeContents(KubeletRootDir))
	return err
}

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
		}
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

// createPodBridge creates the pod network's bridge with the gateway
// address before kube-apiserver starts, so that it can listen there; the
// CNI bridge plugin finds the bridge and its address and keeps both.
func createPodBridge() error {
	for _, args := range [][]string{
		{"link", "add", PodBridge, "type", "bridge"},
		{"addr", "add", PodGateway + "/" + strings.Split(PodCIDR, "/")[1], "dev", PodBridge},
		{"link", "set", PodBridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = removePodNetwork()
			return fmt.Errorf("creating the pod network's bridge: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// removePodNetwork removes what the pod network and kube-proxy leave on the
// host once every pod is gone: the bridge, host-local's allocations and
// kube-proxy's nftables tables (kube-proxy does not remove them on exit).
func removePodNetwork() error {
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + PodBridge); err == nil {
		if out, err := exec.Command("ip", "link", "delete", PodBridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %v: %s", PodBridge, err, out))
		}
	}
	if err := os.RemoveAll(hostLocalDir); err != nil {
		errs = append(errs, err)
	}
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
