package testenv

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
