package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestKubeletRestartKeepsVMs: virt-handler restarts and the kubelet
// restarts right after it (KubeVirt's bug #11843: a starting virt-handler
// labels its node kubevirt.io/schedulable=false, launcher pods select true,
// and the restarting kubelet re-admits them against the label and kills
// them). Two minutes later the guest is the same VMI and the same QEMU
// process.
func TestKubeletRestartKeepsVMs(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-kubelet", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	before := framework.WaitVMI(t, c, vm.Name, "Running", running)
	pid := qemuPID(t, "default", vm.Name)

	handlers, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue})
	if err != nil || len(handlers.Items) != 1 {
		t.Fatalf("virt-handler pods: %d (%v)", len(handlers.Items), err)
	}
	// Every value the node's schedulable label takes from here on: a
	// starting agent must never write false (the old agent did, and its
	// first heartbeat wrote true again within a second, too soon for the
	// kubelet restart to catch it every time; the watch always does).
	node := before.Status.NodeName
	watch, err := c.Kube.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	labels := make(chan string, 1)
	go func() {
		var seen []string
		for ev := range watch.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				if v := n.Labels[v1.NodeSchedulable]; len(seen) == 0 || seen[len(seen)-1] != v {
					seen = append(seen, v)
				}
			}
		}
		labels <- strings.Join(seen, " ")
	}()
	if err := c.Kube.CoreV1().Pods(cluster.Namespace).Delete(t.Context(), handlers.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.Env.RestartKubelet(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	suite.WaitFor(t, "a new virt-handler running", 2*time.Minute, func() (bool, string) {
		pods, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.UID != handlers.Items[0].UID && p.Status.Phase == "Running" {
				return true, ""
			}
		}
		return false, "old handler or none"
	})
	// The kubelet re-admits its pods within seconds; two minutes covers its
	// later pod syncs too.
	time.Sleep(2*time.Minute - time.Since(restarted))
	after, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || after.Status.Phase != v1.Running {
		t.Fatalf("the VM did not survive: VMI %s %s, was %s\n%s", after.UID, after.Status.Phase, before.UID, framework.ComponentLogs(c))
	}
	if now := qemuPID(t, "default", vm.Name); now != pid {
		t.Fatalf("QEMU restarted: pid %d, was %d", now, pid)
	}
	pod := launcherPod(t, c, after)
	if pod.Status.Phase != "Running" {
		t.Fatalf("launcher pod %s is %s after the kubelet restart: %s", pod.Name, pod.Status.Phase, pod.Status.Message)
	}
	console(t, c, vm.Name)
	watch.Stop()
	seen := <-labels
	if seen == "" || slices.Contains(strings.Fields(seen), "false") {
		t.Errorf("node %s's %s label took the values %q through the agent's restart, want true throughout", node, v1.NodeSchedulable, seen)
	}
	t.Logf("node %s's %s label through the agent's and the kubelet's restarts: %s", node, v1.NodeSchedulable, seen)
}
