package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestMasqueradeNetwork boots examples/vm-net.yaml (masquerade on the pod
// network): the VMI reports the pod's IP in status.interfaces, and the
// guest's HTTP server answers on the pod IP and through a ClusterIP Service
// selecting the launcher pod, as `virtctl expose` would create.
func TestMasqueradeNetwork(t *testing.T) {
	c := need(t)
	vm := exampleVM(t, "vm-net.yaml", "vm-net", v1.RunStrategyAlways)
	began := time.Now()
	createVM(t, c, vm)
	waitVMI(t, c, vm.Name, "Running", running)
	toRunning := time.Since(began)
	vmi := waitVMI(t, c, vm.Name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
		return len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	iface := vmi.Status.Interfaces[0]
	pod := launcherPod(t, c, vmi)
	if pod.Spec.HostNetwork {
		t.Fatalf("launcher pod %s is on the host network", pod.Name)
	}
	if iface.Name != "default" || iface.IP != pod.Status.PodIP || !strings.HasPrefix(iface.InfoSource, "domain") {
		t.Errorf("status.interfaces[0] = %+v, want interface default with the launcher pod's IP %s from the domain", iface, pod.Status.PodIP)
	}
	_, podNet, _ := net.ParseCIDR(testenv.PodCIDR)
	if !podNet.Contains(net.ParseIP(pod.Status.PodIP)) {
		t.Errorf("launcher pod IP %s is not on the pod network %s", pod.Status.PodIP, testenv.PodCIDR)
	}

	want := "vmkit guest " + vm.Name
	body := httpGetUntil(t, "http://"+net.JoinHostPort(pod.Status.PodIP, "80")+"/", want, 90*time.Second)
	t.Logf("VM create → Running %v → guest answers HTTP on the pod IP %v: %q", toRunning.Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name + "-http", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"kubevirt.io/vm": vm.Name},
			Ports:    []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}},
		},
	}
	created, err := c.Kube.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
	})
	httpGetUntil(t, "http://"+net.JoinHostPort(created.Spec.ClusterIP, "8080")+"/", want, 60*time.Second)
}

// httpGetUntil GETs url until the body contains want, and returns it.
func httpGetUntil(t *testing.T, url, want string, timeout time.Duration) string {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	var body string
	waitFor(t, "GET "+url+" answering "+want, timeout, func() (bool, string) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, want), fmt.Sprintf("%s: %q", resp.Status, b)
	})
	return body
}
