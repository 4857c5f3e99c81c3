package testenv

import (
	"path/filepath"
	"strconv"
)

// apiserverArgs are kube-apiserver's flags. Listening on 127.0.0.1, it
// publishes no endpoints for the kubernetes Service (none would be
// reachable from a pod); on a node's pod gateway it does, as every cluster.
func (e *Env) apiserverArgs(p *pki, host string, port int, extra []string) []string {
	reconciler := "lease"
	if host == "127.0.0.1" {
		reconciler = "none"
	}
	args := []string{
		"--etcd-servers=" + e.etcdClientURL,
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "kube-apiserver-certs"),
		"--tls-cert-file=" + p.servingCertFile,
		"--tls-private-key-file=" + p.servingKeyFile,
		"--client-ca-file=" + p.caCertFile,
		"--token-auth-file=" + p.tokenFile,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.saPublicKeyFile,
		"--service-account-signing-key-file=" + p.saPrivateKeyFile,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--endpoint-reconciler-type=" + reconciler,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// API aggregation: kube-apiserver proxies requests for an
		// APIService to its server with the front proxy's client
		// certificate and the user in these headers; the aggregated server
		// trusts them by the CA and name it reads from the ConfigMap
		// kube-system/extension-apiserver-authentication. Requests go to the
		// Service's endpoints, as no kube-proxy makes ClusterIPs reachable.
		"--requestheader-client-ca-file=" + p.frontProxyCAFile,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + p.proxyClientCertFile,
		"--proxy-client-key-file=" + p.proxyClientKeyFile,
		"--enable-aggregator-routing=true",
	}
	return append(args, extra...)
}

func (e *Env) controllerManagerArgs(p *pki, port int) []string {
	return []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "kube-controller-manager-certs"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.saPrivateKeyFile,
		"--root-ca-file=" + p.caCertFile,
		"--cluster-signing-cert-file=" + p.caCertFile,
		"--cluster-signing-key-file=" + p.caKeyFile,
		"--controllers=*,-nodeipam",
	}
}

func (e *Env) schedulerArgs(port int) []string {
	return []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "kube-scheduler-certs"),
		"--leader-elect=false",
	}
}
