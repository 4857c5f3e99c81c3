package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	"sigs.k8s.io/yaml"
)

// setupClients fills Config, the clientsets, AdminToken and KubeconfigPath.
// Nothing here talks to the server yet.
func (e *Env) setupClients(p *pki) error {
	host := e.componentURLs["kube-apiserver"]
	e.AdminToken = p.adminToken
	e.Config = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caCertPEM,
			CertData: p.adminCertPEM,
			KeyData:  p.adminKeyPEM,
		},
		// Client-side throttling only slows tests down.
		QPS:   1000,
		Burst: 2000,
	}
	var err error
	if e.Kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("kubernetes clientset: %w", err)
	}
	if e.APIExtensions, err = apiextensionsclientset.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("apiextensions clientset: %w", err)
	}

	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	return writeKubeconfig(e.KubeconfigPath, host, p.caCertPEM, adminUser, p.adminCertPEM, p.adminKeyPEM)
}

// Kubeconfig writes, in a directory of the test's, a kubeconfig that
// points a client at server with no credentials (a fake API server such
// as an httptest.Server), and returns its path.
func Kubeconfig(t testing.TB, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(path, server, nil, "anonymous", nil, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeKubeconfig writes a kubeconfig for server, trusting caPEM, as user
// with the given client certificate and key. It is encoded the way
// clientcmd.Write does, without importing clientcmd (and its flag
// dependencies) into every test binary.
func writeKubeconfig(path, server string, caPEM []byte, user string, certPEM, keyPEM []byte) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: user}
	kc.CurrentContext = "testenv"
	kcJSON, err := k8sruntime.Encode(clientcmdlatest.Codec, kc)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	kcYAML, err := yaml.JSONToYAML(kcJSON)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, kcYAML, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
