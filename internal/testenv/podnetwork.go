package testenv

import "github.com/vmkit/vmkit/internal/testenv/hostsetup"

// Pod network of the node: the CNI bridge plugin with host-local IPAM on a
// node-local bridge. The range is private to the machine: the host has no
// route out for it and does not forward, so no pod traffic leaves the
// machine. kube-proxy (nftables mode) routes ClusterIP Services.
//
// These are the first node's; node i (from 0) has 10.244.i.0/24 with the
// gateway 10.244.i.1 on bridge vmkit-cni<i>. The host routes between the
// nodes' bridges, so pods on different nodes reach each other by their
// addresses, without NAT. Package hostsetup creates and removes the
// bridges and what the networks leave on the host.
//
// The network is dual stack, as a platform cluster can be: node i also has
// fd00:10:244:i::/64 with the gateway fd00:10:244:i::1, pods get an address
// of each family (IPv4 first), and Services a ClusterIP of each when they
// ask (spec.ipFamilyPolicy).
const (
	PodCIDR     = "10.244.0.0/24"
	PodGateway  = "10.244.0.1"
	PodCIDR6    = "fd00:10:244::/64"
	PodGateway6 = "fd00:10:244::1"
	PodBridge   = hostsetup.BridgePrefix + "0"
	// ClusterPodCIDR holds every node's PodCIDR, ClusterPodCIDR6 every
	// node's PodCIDR6.
	ClusterPodCIDR   = "10.244.0.0/16"
	ClusterPodCIDR6  = "fd00:10:244::/56"
	kubeProxyHealthz = "127.0.0.1:10256"
	kubeProxyMetrics = "127.0.0.1:10249"
	kubeProxyUser    = "system:kube-proxy" // bound to system:node-proxier by default
)

// createPodBridge creates the first node's pod network bridge with the
// gateway address before kube-apiserver starts, so that it can listen
// there; the CNI bridge plugin finds the bridge and its address and keeps
// both.
func createPodBridge() error {
	return hostsetup.CreateBridge(PodBridge, PodGateway, PodCIDR, PodGateway6, PodCIDR6)
}
