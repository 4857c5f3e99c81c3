package e2e

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestPasstBinding (#39 item 2): a guest on KubeVirt's passtBinding gets
// its launcher pod's IP from passt, which the launcher runs unprivileged in
// the pod, and serves HTTP on that IP and through a Service; only the listed
// ports reach it; it resolves a Service by name through the cluster DNS
// that passt hands it.
func TestPasstBinding(t *testing.T) {
	c := suite.Need(t)
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-passt", v1.RunStrategyAlways)
	iface := &vm.Spec.Template.Spec.Domain.Devices.Interfaces[0]
	iface.InterfaceBindingMethod = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}
	iface.Ports = []v1.Port{{Port: 80}}

	began := time.Now()
	framework.CreateVM(t, c, vm)
	framework.WaitVMI(t, c, vm.Name, "Running", running)
	toRunning := time.Since(began)
	vmi := framework.WaitVMI(t, c, vm.Name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
		return len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	pod := launcherPod(t, c, vmi)
	if got := vmi.Status.Interfaces[0]; got.Name != "default" || got.IP != pod.Status.PodIP {
		t.Errorf("status.interfaces[0] = %+v, want interface default with the launcher pod's IP %s", got, pod.Status.PodIP)
	}
	// Unprivileged: the qemu user, every port bindable by it, no tap.
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 107 ||
		!slices.ContainsFunc(sc.Sysctls, func(s corev1.Sysctl) bool { return s.Name == "net.ipv4.ip_unprivileged_port_start" && s.Value == "0" }) {
		t.Errorf("launcher pod security context %+v: want user 107 and ip_unprivileged_port_start 0", sc)
	}
	for _, ctr := range pod.Spec.Containers {
		if _, ok := ctr.Resources.Limits["devices.kubevirt.io/tun"]; ok {
			t.Errorf("container %s asks for a tun device, which passt does not need", ctr.Name)
		}
	}

	body := suite.HTTPGetUntil(t, framework.GuestURL(pod.Status.PodIP, 80, "/"), "vmkit guest", 90*time.Second)
	t.Logf("%s (passt): create → Running %v → guest answers HTTP on the pod IP %v: %q", vm.Name,
		toRunning.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))

	// Dual stack (#39 item 3): passt gives the guest the pod's IPv6 too
	// (NDP and DHCPv6 of its own) and forwards the port on both families.
	if ips := vmi.Status.Interfaces[0].IPs; len(ips) != 2 || net.ParseIP(ips[1]).To4() != nil {
		t.Errorf("status.interfaces[0].ipAddresses = %v, want the pod's IPv4 and IPv6 addresses", ips)
	} else {
		suite.HTTPGetUntil(t, framework.GuestURL(ips[1], 80, "/"), "vmkit guest", time.Minute)
		t.Logf("%s (passt): guest answers HTTP on the pod's IPv6 address %s %v after create", vm.Name, ips[1], time.Since(began).Round(time.Millisecond))
	}

	t.Run("Ports", func(t *testing.T) {
		// The guest listens on 8080 too, but only 80 is listed.
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "8080"), 3*time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("port 8080 reached with ports: [{port: 80}]")
		}
	})
	t.Run("ServiceAndClusterDNS", func(t *testing.T) {
		ip := expose(t, c, vm.Name, 8000, 80)
		suite.HTTPGetUntil(t, framework.GuestURL(ip, 8000, "/"), "vmkit guest", 60*time.Second)
		// The guest reaches its own Service by name: passt gave it the
		// pod's name servers and search domains by DHCP.
		url := "http://" + vm.Name + "-http.default.svc." + testenv.ClusterDomain + ":8000/cgi-bin/client"
		suite.HTTPGetUntil(t, framework.GuestURL(pod.Status.PodIP, 80, "/cgi-bin/fetch?"+url), "client ", 60*time.Second)
	})
}

// TestPasstAllPorts: a passtBinding interface that lists no ports forwards
// every TCP and UDP port, as KubeVirt's does, which takes a socket per
// port. Where the launcher pod's open-file limit allows it the guest
// answers on any port it serves; where it does not (this project's
// machines: a hard limit of 20,000), the VMI fails at once with the field
// to change, instead of a passt that cannot start.
func TestPasstAllPorts(t *testing.T) {
	c := suite.Need(t)
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-passt-all", v1.RunStrategyOnce)
	vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running or Failed", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running || vmi.Status.Phase == v1.Failed
	})
	if vmi.Status.Phase == v1.Failed {
		// The node agent's Warning event says why.
		const want = "spec.domain.devices.interfaces[0].ports: none listed, so passt would forward every TCP and UDP port"
		msg := waitEvent(t, c, vmi.UID, corev1.EventTypeWarning, "NetworkSetupFailed").Message
		if !strings.Contains(msg, want) || !strings.Contains(msg, "list the ports the guest serves") {
			t.Fatalf("NetworkSetupFailed event %q, want %q… naming the fix", msg, want)
		}
		t.Logf("the launcher pod's open-file limit is too low to forward every port: %s", msg)
		return
	}
	pod := launcherPod(t, c, vmi)
	for _, port := range []int{80, 8080} {
		suite.HTTPGetUntil(t, framework.GuestURL(pod.Status.PodIP, port, "/"), "vmkit guest", 90*time.Second)
	}
	t.Log("every port forwarded: the guest answers on 80 and 8080")
}
