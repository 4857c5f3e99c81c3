package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's DNS: CoreDNS (hack/build-coredns.sh) runs beside kube-proxy,
// serving cluster.local from the API server, behind KubeDNS's usual Service
// (kube-system/kube-dns, ClusterDNSIP), which the kubelets give every pod as
// its name server (clusterDNS), as on any cluster.
const (
	// ClusterDNSIP is the address of the kube-dns Service.
	ClusterDNSIP = "10.0.0.10"
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// CoreDNSBinaryEnv, when set, names the CoreDNS binary (default
	// <module root>/_output/bin/coredns).
	CoreDNSBinaryEnv = "VMKIT_COREDNS"

	corednsHealth = "127.0.0.1:18053"
	corednsReady  = "127.0.0.1:18054"
)

// corednsBinary returns the CoreDNS binary, or an error naming the command
// that builds it.
func corednsBinary(root string) (string, error) {
	p := os.Getenv(CoreDNSBinaryEnv)
	if p == "" {
		p = filepath.Join(root, "_output", "bin", "coredns")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("the cluster DNS server %s is missing: build it with `hack/build-coredns.sh` (run by `make test-deps`)", p)
	}
	return p, nil
}

// startDNS runs CoreDNS on the first node's pod gateway (port 53, reached
// from every node's pods through the kube-dns Service, which kube-proxy
// routes there) and creates that Service and its EndpointSlice.
func (e *Env) startDNS(ctx context.Context, n *Node) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	bin, err := corednsBinary(root)
	if err != nil {
		return err
	}
	corefile := filepath.Join(e.Dir, "Corefile")
	conf := fmt.Sprintf(`.:53 {
    bind %s
    errors
    health %s
    ready %s
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
    loadbalance
}
`, n.PodGateway, corednsHealth, corednsReady, ClusterDomain, e.KubeconfigPath)
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		return err
	}
	p, err := e.startProcess("coredns", bin, "-conf", corefile)
	if err != nil {
		return err
	}
	if err := poll(ctx, p, "CoreDNS ready", func(ctx context.Context) (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+corednsReady+"/ready", nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}); err != nil {
		return err
	}
	ports := []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec:       corev1.ServiceSpec{ClusterIP: ClusterDNSIP, Ports: ports},
	}
	if _, err := e.Kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kube-dns Service: %w", err)
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-coredns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{n.PodGateway}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	for i := range ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: &ports[i].Name, Port: &ports[i].Port, Protocol: &ports[i].Protocol})
	}
	if _, err := e.Kube.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kube-dns EndpointSlice: %w", err)
	}
	return nil
}
