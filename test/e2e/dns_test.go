package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestVMIHostnameResolves (#39 item 1): a VMI's spec.hostname and
// spec.subdomain with a headless Service of that name give it KubeVirt's
// documented DNS name, <hostname>.<subdomain>.<namespace>.svc.cluster.local,
// which the cluster's DNS answers with its launcher pod's IP; the
// kubernetes Service resolves too.
func TestVMIHostnameResolves(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := tinyVM(t, "vm-dns", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Hostname, vm.Spec.Template.Spec.Subdomain = "myvm", "tinies"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "tinies", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"kubevirt.io/vm": vm.Name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := c.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
	})
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	pod := launcherPod(t, c, vmi)
	if pod.Spec.Hostname != "myvm" || pod.Spec.Subdomain != "tinies" {
		t.Fatalf("launcher pod hostname %q subdomain %q, want myvm and tinies", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	// Ask the cluster's DNS server directly, where the kube-dns Service
	// sends pods (testenv runs it on the first node's pod gateway).
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, net.JoinHostPort(c.Env.Node.PodGateway, "53"))
	}}
	lookup := func(name string, want string) {
		t.Helper()
		suite.WaitFor(t, name+" resolves to "+want, time.Minute, func() (bool, string) {
			addrs, err := resolver.LookupHost(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			return slices.Contains(addrs, want), "resolved to " + strings.Join(addrs, " ")
		})
	}
	lookup("kubernetes.default.svc."+testenv.ClusterDomain, "10.0.0.1")
	p, err := c.Kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || p.Status.PodIP == "" {
		t.Fatalf("launcher pod IP: %v", err)
	}
	lookup("myvm.tinies.default.svc."+testenv.ClusterDomain, p.Status.PodIP)
}
