package hostsetup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// Host state of the nodes' pod networks: the CNI bridge plugin with
// host-local IPAM on a bridge per node (BridgePrefix0, BridgePrefix1, ...),
// and kube-proxy (nftables mode) for ClusterIP Services.
const (
	// BridgePrefix names the nodes' bridges: node i's is BridgePrefix<i>.
	BridgePrefix = "vmkit-cni"
	// PodNetworkName names the first node's CNI network; node i's (from
	// 0) is PodNetworkName-<i+1> from the second on.
	PodNetworkName = "vmkit-pods"
	// HostLocalRoot is where host-local IPAM keeps the nodes' allocations,
	// in a directory named as the node's network.
	HostLocalRoot = "/var/lib/cni/networks"
	hostLocalDir  = HostLocalRoot + "/" + PodNetworkName
	// KubeProxyNFTTable is kube-proxy's nftables table (ip and ip6).
	KubeProxyNFTTable = "kube-proxy"
	// SandboxNetnsDir is where containerd pins pod sandboxes' namespaces.
	SandboxNetnsDir = "/run/netns"
	// cniCacheDir is where libcni (in containerd) keeps each sandbox's
	// ADD result, as <network>-<sandbox id>-<interface>, until its DEL,
	// which a stopped node never runs.
	cniCacheDir = "/var/lib/cni/results"
)

// cniCacheEntry is a libcni cache file of a vmkit pod network: the
// network, the sandbox's ID.
var cniCacheEntry = regexp.MustCompile(`^(` + regexp.QuoteMeta(PodNetworkName) + `(?:-[0-9]+)?)-([0-9a-f]{64})-[^-]+$`)

// CNICacheFiles are the libcni cache files of the sandboxes on network
// (every vmkit pod network when it is ""): the network's and the loopback
// network's of the same sandboxes.
func CNICacheFiles(network string) []string {
	entries, _ := os.ReadDir(cniCacheDir)
	var files []string
	for _, e := range entries {
		m := cniCacheEntry.FindStringSubmatch(e.Name())
		if m == nil || (network != "" && m[1] != network) {
			continue
		}
		files = append(files, filepath.Join(cniCacheDir, e.Name()))
		if lo := filepath.Join(cniCacheDir, "cni-loopback-"+m[2]+"-lo"); Exists(lo) {
			files = append(files, lo)
		}
	}
	return files
}

// RemoveCNICache removes the libcni cache files of network's sandboxes
// (every vmkit pod network's when it is "").
func RemoveCNICache(network string) error {
	var errs []error
	for _, f := range CNICacheFiles(network) {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CreateBridge creates a node's pod network bridge with its gateway
// addresses, IPv4 and IPv6 (without duplicate address detection: the
// address is the host's own on a link it made), and turns on IPv6
// forwarding (enableIPv6Forwarding).
func CreateBridge(bridge, gateway, cidr, gateway6, cidr6 string) error {
	if err := enableIPv6Forwarding(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", gateway + "/" + strings.Split(cidr, "/")[1], "dev", bridge},
		{"addr", "add", gateway6 + "/" + strings.Split(cidr6, "/")[1], "dev", bridge, "nodad"},
		{"link", "set", bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = RemoveBridge(bridge)
			return fmt.Errorf("creating the pod network's bridge: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// RemoveBridge deletes a pod network's bridge if it is there.
func RemoveBridge(bridge string) error {
	if _, err := os.Stat("/sys/class/net/" + bridge); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting bridge %s: %v: %s", bridge, err, out)
	}
	return nil
}

// ipv6ForwardingSysctl is the host's IPv6 forwarding switch, and
// ipv6ForwardingSaved where enableIPv6Forwarding keeps the value it
// replaced, for RemovePodNetwork to put back.
const ipv6ForwardingSysctl = "/proc/sys/net/ipv6/conf/all/forwarding"

// ipv6ForwardingSaved is a variable for the test, which keeps its own.
var ipv6ForwardingSaved = "/run/vmkit-ipv6-forwarding"

// enableIPv6Forwarding lets the host route IPv6 between the pods and the
// nodes' bridges, as net.ipv4.ip_forward does for IPv4 (the CNI bridge
// plugin would turn it on at the first pod anyway); RemovePodNetwork
// restores the value it found. The host then ignores router
// advertisements on its own interfaces (it is a router), which leaves
// static IPv6 configuration alone.
func enableIPv6Forwarding() error {
	old, err := os.ReadFile(ipv6ForwardingSysctl)
	if err != nil {
		return fmt.Errorf("reading net.ipv6.conf.all.forwarding: %w (is IPv6 disabled on this host?)", err)
	}
	if strings.TrimSpace(string(old)) == "1" {
		return nil
	}
	if !Exists(ipv6ForwardingSaved) {
		if err := os.WriteFile(ipv6ForwardingSaved, old, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(ipv6ForwardingSysctl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enabling net.ipv6.conf.all.forwarding: %w", err)
	}
	return nil
}

// restoreIPv6Forwarding puts back the value enableIPv6Forwarding replaced.
func restoreIPv6Forwarding() error {
	old, err := os.ReadFile(ipv6ForwardingSaved)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(ipv6ForwardingSysctl, old, 0o644); err != nil {
		return fmt.Errorf("restoring net.ipv6.conf.all.forwarding: %w", err)
	}
	return os.Remove(ipv6ForwardingSaved)
}

// RemovePodNetwork removes what the pod networks of every node and
// kube-proxy leave on the host once every pod is gone: the bridges
// (vmkit-cni0, vmkit-cni1, ...), host-local's allocations, libcni's cache
// of the sandboxes and kube-proxy's nftables tables (kube-proxy does not
// remove them on exit).
func RemovePodNetwork() error {
	var errs []error
	bridges, _ := filepath.Glob("/sys/class/net/" + BridgePrefix + "[0-9]*")
	for _, b := range bridges {
		errs = append(errs, RemoveBridge(filepath.Base(b)))
	}
	allocations, _ := filepath.Glob(hostLocalDir + "*")
	for _, d := range allocations {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, RemoveCNICache(""), restoreIPv6Forwarding())
	// containerd pins each sandbox's network namespace at /run/netns/cni-*
	// and removes it only when it tears the sandbox down, which a stopped
	// node never does.
	pinned, _ := filepath.Glob(filepath.Join(SandboxNetnsDir, "cni-*"))
	if len(pinned) > 0 {
		// `ip netns add` (the network tests) bind-mounts /run/netns on
		// itself, hiding pins containerd made before: drop that bind mount
		// (ip makes it again when it needs it) to reach them.
		for range 4 {
			if syscall.Unmount(SandboxNetnsDir, syscall.MNT_DETACH) != nil {
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
		if exec.Command("nft", "list", "table", family, KubeProxyNFTTable).Run() != nil {
			continue // absent (or no nft: then kube-proxy never ran either)
		}
		if out, err := exec.Command("nft", "delete", "table", family, KubeProxyNFTTable).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting nftables table %s %s: %v: %s", family, KubeProxyNFTTable, err, out))
		}
	}
	return errors.Join(errs...)
}
