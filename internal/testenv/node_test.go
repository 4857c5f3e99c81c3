package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vmkit/vmkit/internal/testenv/hostsetup"
)

// TestNode runs a real kubelet and containerd, runs a pod on them and checks
// that stopping the node leaves no pod process, shim or mount behind.
func TestNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kubelet and containerd")
	}
	pause := os.Getenv("VMKIT_PAUSE_IMAGE")
	if pause == "" {
		root, err := ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		pause = root + "/_output/images/pause.tar"
	}
	if _, err := os.Stat(pause); err != nil {
		t.Fatalf("the pause image is missing (%v): build it with `hack/build-images.sh` (run by `make test-deps`)", err)
	}
	env := Start(t, Options{WithControllerManager: true, WithScheduler: true, Node: &NodeOptions{Images: []string{pause}}})
	ctx := t.Context()
	if err := waitServiceAccount(t, env); err != nil {
		t.Fatal(err)
	}
	// A pod on the host network and one on the pod network.
	for _, hostNetwork := range []bool{true, false} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "pause-", Namespace: "default"},
			Spec: corev1.PodSpec{
				HostNetwork:                   hostNetwork,
				TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{{
					// Pulled from the registry (registry.k8s.io is mirrored to it), every time.
					Name: "pause", Image: pauseImage, ImagePullPolicy: corev1.PullAlways,
				}},
			},
		}
		created, err := env.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		var got *corev1.Pod
		for {
			got, err = env.Kube.CoreV1().Pods("default").Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" {
				t.Logf("hostNetwork=%v: pod %s Running on %s (pod IP %q)", hostNetwork, got.Name, got.Spec.NodeName, got.Status.PodIP)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hostNetwork=%v: pod %s not Running with an IP after 60s: %+v", hostNetwork, got.Name, got.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if hostNetwork {
			continue
		}
		_, podNet, _ := net.ParseCIDR(PodCIDR)
		if ip := net.ParseIP(got.Status.PodIP); ip == nil || !podNet.Contains(ip) || ip.String() == PodGateway {
			t.Errorf("pod IP %s is not a pod address in %s", got.Status.PodIP, PodCIDR)
		}
		// Dual stack: an IPv6 address from PodCIDR6 after the IPv4 one.
		_, podNet6, _ := net.ParseCIDR(PodCIDR6)
		if len(got.Status.PodIPs) != 2 || !podNet6.Contains(net.ParseIP(got.Status.PodIPs[1].IP)) {
			t.Errorf("pod IPs %v, want an IPv4 and an IPv6 address (in %s)", got.Status.PodIPs, PodCIDR6)
		}
		// The pod's network namespace answers from its addresses: a port
		// nothing listens on is refused at once (a missing route would
		// time out).
		for _, ip := range got.Status.PodIPs {
			_, err = net.DialTimeout("tcp", net.JoinHostPort(ip.IP, "1"), 5*time.Second)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dialing the pod at %s: %v, want connection refused from the pod", net.JoinHostPort(ip.IP, "1"), err)
			}
		}
	}
	t.Run("ClusterIPService", func(t *testing.T) { testClusterIP(t, env) })
	// Stop fails naming what the node left on the host (bridges, cgroups,
	// mounts, network namespaces, nftables tables, processes, loop
	// devices), checked while it still holds the node lock.
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := hostsetup.MountPoints(env.Dir); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", env.Dir, left)
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if strings.Contains(string(cmdline), env.Dir) {
			t.Errorf("process %s left: %s", p.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// waitServiceAccount waits for the default ServiceAccount the controller
// manager creates, without which pods are rejected.
func waitServiceAccount(t *testing.T, env *Env) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := env.Kube.CoreV1().ServiceAccounts("default").Get(t.Context(), "default", metav1.GetOptions{})
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testClusterIP checks kube-proxy: a ClusterIP Service whose endpoint is a
// server of the test's on the node's pod-network gateway address answers on
// the Service's address.
func testClusterIP(t *testing.T, env *Env) {
	ctx := t.Context()
	l, err := net.Listen("tcp", net.JoinHostPort(PodGateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "through kube-proxy") }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := int32(l.Addr().(*net.TCPAddr).Port)

	svc, err := env.Kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-proxy"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready, name, proto := true, "http", corev1.ProtocolTCP
	if _, err := env.Kube.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "testenv-proxy-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{PodGateway}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "8080") + "/"
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) == "through kube-proxy" {
				t.Logf("Service %s at %s answered", svc.Name, url)
				return
			}
			err = fmt.Errorf("%s: %q", resp.Status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s (ClusterIP Service to %s:%d) after 30s: %v", url, PodGateway, port, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestNodeLayout: the first node keeps the single node's names, addresses
// and host paths; the second has its own name, pod network, cgroup root
// and directories, which its pods see at the host's paths.
func TestNodeLayout(t *testing.T) {
	first, second := newNode("/tmp/run", 0), newNode("/tmp/run", 1)
	if first.Name != NodeName || first.PodCIDR != PodCIDR || first.PodGateway != PodGateway || first.PodBridge != PodBridge ||
		first.cgroupRoot != "" || first.networkName != hostsetup.PodNetworkName || first.StorageDir != NodeStorageDir("/tmp/run") {
		t.Errorf("first node %+v, want the single node's layout", first)
	}
	if got := first.HostPath("/var/lib/kubelet/pods/x"); got != "/var/lib/kubelet/pods/x" {
		t.Errorf("first node: HostPath(/var/lib/kubelet/pods/x) = %s", got)
	}
	if second.Name != "localhost-2" || second.PodCIDR != "10.244.1.0/24" || second.PodGateway != "10.244.1.1" || second.PodBridge != "vmkit-cni1" ||
		second.cgroupRoot != "vmkit-node-localhost-2" || second.networkName != "vmkit-pods-2" || second.StorageDir != "/tmp/run/node-2/storage" {
		t.Errorf("second node %+v", second)
	}
	for seen, want := range map[string]string{
		"/var/lib/kubelet/pods/x":          "/tmp/run/node-2/kubelet/pods/x",
		"/var/lib/kubelet":                 "/tmp/run/node-2/kubelet",
		"/var/run/kubevirt/sockets":        "/tmp/run/node-2/run/kubevirt/sockets",
		"/var/run/kubevirt-private/x":      "/tmp/run/node-2/run/kubevirt-private/x",
		"/var/log/pods/ns_p_uid/c/0.log":   "/tmp/run/node-2/log/pods/ns_p_uid/c/0.log",
		"/var/lib/kubeletx":                "/var/lib/kubeletx",
		"/tmp/run/node-2/storage/block/b0": "/tmp/run/node-2/storage/block/b0",
	} {
		if got := second.HostPath(seen); got != want {
			t.Errorf("second node: HostPath(%s) = %s, want %s", seen, got, want)
		}
	}
	for _, c := range []struct{ path, dir string }{
		{"/tmp/vmkit-testenv-1/node/storage/x", "/node/"},
		{"/tmp/vmkit-testenv-1/node-2/kubelet/x", "/node-2/"},
		{"/tmp/vmkit-testenv-1/nodes/x", ""},
	} {
		if got := nodeDirPattern.FindString(c.path); got != c.dir {
			t.Errorf("node directory in %s: %q, want %q", c.path, got, c.dir)
		}
	}
}
