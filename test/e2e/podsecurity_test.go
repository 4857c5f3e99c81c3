package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestRestrictedNamespace boots examples/vm-net.yaml (the tiny guest on the
// pod network, masquerade, serving HTTP) in a namespace that enforces the
// Pod Security "restricted" level: the default launcher pod must be
// admitted (non-root, no privilege escalation, RuntimeDefault seccomp, every
// capability dropped), and the guest must run as it does elsewhere, with
// QEMU as the qemu user 107: Running, its address by DHCP from the
// launcher, HTTP answered on the pod IP, its marker on the console. A root
// launcher pod (vmkit's before the non-root launcher, or the Root feature
// gate's) is refused by such a namespace, which the test shows first.
func TestRestrictedNamespace(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	const ns = "vmkit-restricted"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the VM's cleanup (registered later, run earlier)
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Kube.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns, err)
			return
		}
		suite.WaitFor(t, "namespace "+ns+" gone", 2*time.Minute, func() (bool, string) {
			_, err := c.Kube.CoreV1().Namespaces().Get(cctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})

	// The namespace enforces: a pod whose container may run as root with
	// the runtime's capabilities (what the root launcher's compute
	// container is, in PSS terms) is refused.
	rootPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "root-", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "compute", Image: "vmkit/busybox:latest",
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr[int64](0), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
		}}},
	}
	_, err := c.Kube.CoreV1().Pods(ns).Create(ctx, rootPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("namespace %s admits a root pod (err %v): it does not enforce Pod Security restricted", ns, err)
	}

	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-restricted", v1.RunStrategyAlways)
	vm.Namespace = ns
	began := time.Now()
	framework.CreateVM(t, c, vm)
	var vmi *v1.VirtualMachineInstance
	suite.WaitFor(t, "VMI "+ns+"/"+vm.Name+" Running with an address", 3*time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error() + "; events: " + events(ctx, c.Kube.CoreV1().Events(ns))
		}
		vmi = got
		ok := got.Status.Phase == v1.Running && len(got.Status.Interfaces) > 0 && got.Status.Interfaces[0].IP != ""
		return ok, fmt.Sprintf("phase %s, interfaces %+v; events: %s", got.Status.Phase, got.Status.Interfaces, events(ctx, c.Kube.CoreV1().Events(ns)))
	})
	toRunning := time.Since(began)

	pod := launcherPod(t, c, vmi)
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 107 {
		t.Errorf("launcher pod %s: securityContext %+v, want runAsNonRoot and runAsUser 107", pod.Name, sc)
	}
	if u := procUser(t, qemuPID(t, ns, vm.Name)); u != 107 {
		t.Errorf("QEMU of %s runs as uid %d, want 107", vm.Name, u)
	}
	body := suite.HTTPGetUntil(t, framework.GuestURL(pod.Status.PodIP, 80, "/"), "vmkit guest "+vm.Name, 90*time.Second)
	t.Logf("%s in a restricted namespace: create → Running %v → guest answers HTTP on the pod IP %v: %q", vm.Name,
		toRunning.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))

	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if lines, err := c.Console(cctx, ns, vm.Name, guestMarker); err != nil {
		t.Fatalf("console: %v (so far: %q)", err, lines)
	}
}

// events lists a namespace's warning events, for a failure message.
func events(ctx context.Context, ev interface {
	List(context.Context, metav1.ListOptions) (*corev1.EventList, error)
}) string {
	list, err := ev.List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Reason+": "+e.Message)
	}
	return strings.Join(out, " | ")
}

// procUser is the real user of a process on the node.
func procUser(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			u, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}
