package e2e

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestDualStackMasquerade (#39 item 3): on the dual-stack local cluster a
// masquerade guest answers on both of its pod's families, directly and
// through a dual-stack Service, and reaches out over IPv6 from its pod's
// address. The guest (dhcpcd, as a distribution's) takes fd10:0:2::2 by
// DHCPv6 from the launcher and its default route from the launcher's
// router advertisements: the IPv6 answers need that route back.
func TestDualStackMasquerade(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-dual", v1.RunStrategyAlways)
	began := time.Now()
	framework.CreateVM(t, c, vm)
	ips := waitDualStack(t, vm.Name)

	// Both families, straight to the pod. IPv4 answers first (one DHCP
	// exchange); IPv6 waits for a solicitation, an advertisement and
	// DHCPv6's four messages.
	toRunning := time.Since(began)
	var answered []string
	for _, ip := range ips {
		suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/"), "vmkit guest", 90*time.Second)
		answered = append(answered, time.Since(began).Round(time.Millisecond).String())
	}
	t.Logf("%s (masquerade, dual stack): create → Running with both addresses %v → HTTP on %s %s → on %s %s",
		vm.Name, toRunning.Round(time.Millisecond), ips[0], answered[0], ips[1], answered[1])

	// A dual-stack Service: kube-proxy sends both ClusterIPs to the pod.
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-dual", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: &policy,
			Selector:       map[string]string{"kubevirt.io/vm": vm.Name},
			Ports:          []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromInt32(80)}},
		},
	}
	created, err := c.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
	})
	if len(created.Spec.ClusterIPs) != 2 {
		t.Fatalf("Service %s got ClusterIPs %v, want one of each family", svc.Name, created.Spec.ClusterIPs)
	}
	for _, ip := range created.Spec.ClusterIPs {
		suite.HTTPGetUntil(t, framework.GuestURL(ip, 8000, "/"), "vmkit guest", time.Minute)
	}

	// Out of the guest over IPv6: a server on the node's IPv6 pod gateway
	// sees the guest coming from its pod's IPv6 address (NAT66).
	checkIPv6Egress(t, c.Env.Node.PodGateway6, ips)
}

// TestDualStackBridge: a guest with the bridge binding takes both of its
// pod's addresses, IPv6 by DHCPv6 from the launcher, with the pod as its
// router (the node agent's advertisements, kept off the rest of the pod
// network), and answers and reaches out on both.
func TestDualStackBridge(t *testing.T) {
	c := suite.Need(t)
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-dual-bridge", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	began := time.Now()
	framework.CreateVM(t, c, vm)
	ips := waitDualStack(t, vm.Name)
	var answered []string
	for _, ip := range ips {
		suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/"), "vmkit guest", 90*time.Second)
		answered = append(answered, time.Since(began).Round(time.Millisecond).String())
	}
	t.Logf("%s (bridge, dual stack): create → HTTP on %s %s → on %s %s", vm.Name, ips[0], answered[0], ips[1], answered[1])
	// No NAT: the guest reaches out with the pod's own IPv6 address.
	checkIPv6Egress(t, c.Env.Node.PodGateway6, ips)
}

// waitDualStack waits until the VMI of name runs with an IPv4 and an IPv6
// address on interface default, which must be its launcher pod's, and
// returns them (IPv4 first).
func waitDualStack(t *testing.T, name string) []string {
	t.Helper()
	c := suite.Need(t)
	vmi := framework.WaitVMI(t, c, name, "an IPv4 and an IPv6 address in status.interfaces", func(vmi *v1.VirtualMachineInstance) bool {
		i := ifaceStatus(vmi, "default")
		return vmi.Status.Phase == v1.Running && i != nil && len(i.IPs) == 2
	})
	ips := ifaceStatus(vmi, "default").IPs
	v4, v6 := net.ParseIP(ips[0]), net.ParseIP(ips[1])
	if v4 == nil || v4.To4() == nil || v6 == nil || v6.To4() != nil {
		t.Fatalf("status.interfaces[default].ipAddresses = %v, want an IPv4 address, then an IPv6 one", ips)
	}
	pod := launcherPod(t, c, vmi)
	if len(pod.Status.PodIPs) != 2 || pod.Status.PodIPs[0].IP != ips[0] || pod.Status.PodIPs[1].IP != ips[1] {
		t.Errorf("the VMI reports %v, its launcher pod has %v", ips, pod.Status.PodIPs)
	}
	return ips
}

// checkIPv6Egress has the guest at ips (IPv4, then IPv6) fetch a page from
// a server on the node's IPv6 pod gateway, which must see the request come
// from ips[1].
func checkIPv6Egress(t *testing.T, gateway6 string, ips []string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway6, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		_, _ = w.Write([]byte("seen " + host + "\n"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	target := "http://" + net.JoinHostPort(gateway6, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + "/"
	body := suite.HTTPGetUntil(t, framework.GuestURL(ips[0], 80, "/cgi-bin/fetch?"+target), "seen ", 30*time.Second)
	if got := strings.TrimSpace(body); got != "seen "+ips[1] {
		t.Errorf("the guest's IPv6 request reached %s as %q, want it from the pod's %s", target, got, ips[1])
	}
}
