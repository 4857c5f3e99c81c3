package virtapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// HandlerDialer finds the node agent (virt-handler) of a node.
type HandlerDialer interface {
	// Handler returns the base URL ("https://10.244.0.5:8186") of the node
	// agent's REST API on node and the TLS configuration to reach it.
	Handler(ctx context.Context, node string) (baseURL string, tlsConfig *tls.Config, err error)
}

// HandlerPods finds node agents as KubeVirt's virt-api does: the running
// virt-handler pod (label kubevirt.io=virt-handler) on the node, in the
// install namespace, at its pod IP.
type HandlerPods struct {
	Kube      kubernetes.Interface
	Namespace string
	// Port is the agent's REST API port (8186).
	Port int
	// Host, when set, replaces the pod IP (agents on the host network
	// listening on one known address).
	Host string
	// ClientCertDir holds tls.crt and tls.key, the client certificate the
	// agents accept; CABundleFile the CA that signed their serving
	// certificates. Both are read on every connection, so rotated files
	// are used at once.
	ClientCertDir string
	CABundleFile  string
	// ServerName is the name in the agents' serving certificate.
	ServerName string
}

// Handler implements HandlerDialer.
func (h *HandlerPods) Handler(ctx context.Context, node string) (string, *tls.Config, error) {
	tlsConfig, err := h.tls()
	if err != nil {
		return "", nil, err
	}
	host := h.Host
	if host == "" {
		pods, err := h.Kube.CoreV1().Pods(h.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue,
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
		})
		if err != nil {
			return "", nil, fmt.Errorf("finding virt-handler on node %s: %w", node, err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				host = p.Status.PodIP
				break
			}
		}
		if host == "" {
			return "", nil, fmt.Errorf("no running virt-handler pod on node %s in namespace %s", node, h.Namespace)
		}
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(h.Port)), tlsConfig, nil
}

func (h *HandlerPods) tls() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(h.ClientCertDir, corev1.TLSCertKey), filepath.Join(h.ClientCertDir, corev1.TLSPrivateKeyKey))
	if err != nil {
		return nil, fmt.Errorf("virt-handler client certificate: %w", err)
	}
	ca, err := os.ReadFile(h.CABundleFile)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("CA bundle %s holds no certificate", h.CABundleFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   h.ServerName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
