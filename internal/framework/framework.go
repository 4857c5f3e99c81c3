// Package framework holds what vmkit's end-to-end suites share (test/e2e
// on one node, test/e2e2node on two): the cluster a test binary's tests
// share, waits that fail with the last state they saw and the components'
// logs, VMs read from examples/, and HTTP requests to guests.
//
// A test package declares one Suite: its TestMain starts the cluster and
// records it with Suite.Set; each test gets it from Suite.Need.
package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Suite is the cluster a test package's tests share. The zero Suite has
// none: Need fails until Set records one.
type Suite struct {
	cluster  *cluster.Cluster // nil with -short
	startErr error            // why the cluster did not start
}

// Set records the cluster TestMain started for the suite, or err, why it
// could not start one (each test then fails with it).
func (s *Suite) Set(c *cluster.Cluster, err error) {
	s.cluster, s.startErr = c, err
}

// Need returns the suite's cluster. It skips the test with -short and
// fails it with the reason the cluster did not start.
func (s *Suite) Need(t testing.TB) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: starts a cluster")
	}
	if s.startErr != nil {
		t.Fatal(s.startErr)
	}
	if s.cluster == nil {
		t.Fatal("framework: TestMain started no cluster (Suite.Set)")
	}
	return s.cluster
}

// WaitFor waits as the package's WaitFor does, with the suite's cluster.
func (s *Suite) WaitFor(t testing.TB, what string, timeout time.Duration, f func() (bool, string)) {
	t.Helper()
	WaitFor(t, s.cluster, what, timeout, f)
}

// HTTPGetUntil requests url as the package's HTTPGetUntil does, with the
// suite's cluster.
func (s *Suite) HTTPGetUntil(t testing.TB, url, want string, timeout time.Duration) string {
	t.Helper()
	return HTTPGetUntil(t, s.cluster, url, want, timeout)
}

// ComponentLogs are the last log lines of every vmkit pod (the components'
// and the launchers' in namespace default), for failures.
func ComponentLogs(c *cluster.Cluster) string {
	if c == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.PodLogs(ctx, cluster.Namespace, v1.AppLabel, 40) + c.PodLogs(ctx, "default", v1.AppLabel, 40)
}

// WaitFor polls f every 250 ms until it returns true, or fails the test
// after timeout with the last state f reported and the logs of c's
// components (none when c is nil). With E2E_TRACE set in the environment it logs each new state f reports,
// with the time since the wait began: where a slow step spends its time.
func WaitFor(t testing.TB, c *cluster.Cluster, what string, timeout time.Duration, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	start, prev := time.Now(), ""
	for {
		ok, last := f()
		if last != prev && os.Getenv("E2E_TRACE") != "" {
			t.Logf("TRACE %v %s: %s", time.Since(start).Round(100*time.Millisecond), what, last)
			prev = last
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (last: %s)\n%s", what, timeout, last, ComponentLogs(c))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ExampleVM reads the VirtualMachine of examples/file as name in namespace
// default, its template's kubevirt.io/vm label (if it has one) following
// the name. A strategy other than "" replaces its run strategy.
func ExampleVM(t testing.TB, file, name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	vm := &v1.VirtualMachine{}
	if err := yaml.UnmarshalStrict(data, vm); err != nil {
		t.Fatalf("examples/%s: %v", file, err)
	}
	vm.Name, vm.Namespace = name, "default"
	if strategy != "" {
		vm.Spec.RunStrategy = &strategy
	}
	if _, ok := vm.Spec.Template.ObjectMeta.Labels["kubevirt.io/vm"]; ok {
		vm.Spec.Template.ObjectMeta.Labels["kubevirt.io/vm"] = name
	}
	return vm
}

// CreateVM creates vm and, when the test ends, deletes it and waits until
// its launcher pods are gone.
func CreateVM(t testing.TB, c *cluster.Cluster, vm *v1.VirtualMachine) {
	t.Helper()
	if _, err := c.Client.KubevirtV1().VirtualMachines(vm.Namespace).Create(t.Context(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err := c.Client.KubevirtV1().VirtualMachines(vm.Namespace).Delete(ctx, vm.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting VM %s: %v", vm.Name, err)
		}
		WaitFor(t, c, "launcher pods of "+vm.Name+" gone", 2*time.Minute, func() (bool, string) {
			pods, err := c.Kube.CoreV1().Pods(vm.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtLauncherValue})
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, p := range pods.Items {
				if strings.HasPrefix(p.Name, "virt-launcher-"+vm.Name+"-") {
					n++
				}
			}
			return n == 0, fmt.Sprintf("%d pods", n)
		})
	})
}

// WaitVMI waits up to 3 minutes until the VMI default/name satisfies cond,
// and returns it.
func WaitVMI(t testing.TB, c *cluster.Cluster, name, what string, cond func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
	t.Helper()
	var out *v1.VirtualMachineInstance
	WaitFor(t, c, "VMI default/"+name+" "+what, 3*time.Minute, func() (bool, string) {
		vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		out = vmi
		return cond(vmi), fmt.Sprintf("phase %s, uid %s, on %q", vmi.Status.Phase, vmi.UID, vmi.Status.NodeName)
	})
	return out
}

// GuestURL is the URL of path on a guest's HTTP server at ip and port.
func GuestURL(ip string, port int, path string) string {
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + path
}

// HTTPGetUntil GETs url until the body contains want, and returns it; a
// failure carries the logs of c's components. Each
// attempt is a new connection given 500 ms to connect (the pod network is
// local): a SYN sent before the guest had its address is not left to TCP's
// 1 s retransmission, so the first answer is seen within 750 ms of the
// guest being able to give it (the benchmarks time it). Once connected, an
// attempt waits up to 5 s for the answer: a guest under TCG on a loaded
// machine may take seconds to run a CGI, and an attempt given up early
// leaves its CGI running in the guest, piling work on a slow guest.
func HTTPGetUntil(t testing.TB, c *cluster.Cluster, url, want string, timeout time.Duration) string {
	t.Helper()
	client := &http.Client{Timeout: 6 * time.Second, Transport: &http.Transport{
		DisableKeepAlives:     true,
		DialContext:           (&net.Dialer{Timeout: 500 * time.Millisecond}).DialContext,
		ResponseHeaderTimeout: 5 * time.Second,
	}}
	var body string
	WaitFor(t, c, "GET "+url+" answering "+want, timeout, func() (bool, string) {
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
