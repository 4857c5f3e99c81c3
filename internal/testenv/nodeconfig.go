package testenv

import (
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vmkit/vmkit/internal/registry"
)

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
	// containerd takes the first network in conf_dir: the node's pod
	// network, or Multus with the pod network as its delegate, from a
	// plugin directory that adds Multus to the system's plugins.
	podNetwork := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [{
  "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local",
    "ranges": [[{"subnet": %q, "gateway": %q}], [{"subnet": %q, "gateway": %q}]],
    "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}
}]}
`, n.networkName, n.PodBridge, n.PodCIDR, n.PodGateway, n.PodCIDR6, n.PodGateway6)
	pluginDir := cniBin
	if opts.Multus {
		if err := os.MkdirAll(filepath.Join(n.dir, "cni"), 0o755); err != nil {
			return err
		}
		dir, err := n.writeMultus(p, server, cniBin, podNetwork)
		if err != nil {
			return err
		}
		pluginDir = dir
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
		pauseImage, pluginDir, filepath.Join(n.dir, "cni"), filepath.Join(n.dir, "certs.d"))
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
	// containerd sets up each sandbox's loopback itself.
	files := map[string]string{
		"containerd.toml":            containerd,
		"kubelet-config.yaml":        kubelet,
		"cni/10-vmkit-pods.conflist": podNetwork,
	}
	if n.Index == 0 {
		clusterCIDR := PodCIDR + "," + PodCIDR6
		if count > 1 {
			clusterCIDR = ClusterPodCIDR + "," + ClusterPodCIDR6
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
