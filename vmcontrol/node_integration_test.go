package vmcontrol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
	"github.com/vmkit/vmkit/vmcontrol/node"
)

// TestNodeController runs the Manager's node controller against a real API
// server. node01 (where fakeKubelet binds launcher pods) has a node agent
// heartbeating; three VMIs run there. Then the agent goes quiet: its last
// heartbeat expires with no further event, the VMI whose launcher pod has
// exited (which only the agent would have reported) fails with reason
// NodeUnresponsive, the VMI whose launcher still runs is left alone, the
// node is neither tainted nor relabeled (other workloads keep it), and a
// launcher pod made now is kept off it by its own node affinity. After a
// new heartbeat, launcher pods may go there again. Once the Node is deleted
// and the survivor's launcher stops, the survivor fails too.
func TestNodeController(t *testing.T) {
	const timeout = time.Minute
	c := startCluster(t)
	c.fakeKubelet(t)
	c.startManager(t, vmcontrol.LeaderElection{}, func(o *vmcontrol.Options) { o.NodeHeartbeatTimeout = timeout })
	ctx := context.Background()
	nodes := c.kube.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01",
		Labels:      map[string]string{v1.NodeSchedulable: "true"},
		Annotations: map[string]string{v1.VirtHandlerHeartbeat: time.Now().UTC().Format(time.RFC3339)},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	vmis := map[string]*v1.VirtualMachineInstance{}
	for _, name := range []string{"survivor", "exited", "pod-deleted"} {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: newVM(name, v1.RunStrategyAlways).Spec.Template.Spec}
		if _, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"survivor", "exited", "pod-deleted"} {
		if vmi := c.waitVMIPhase(t, name, v1.Scheduled); vmi.Status.NodeName != "node01" {
			t.Fatalf("VMI %s scheduled to %q, want node01", name, vmi.Status.NodeName)
		}
		c.setVMIPhase(t, name, v1.Running)
		vmi, err := c.vmi(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		vmis[name] = vmi
	}
	// exited's launcher pod finished: on a healthy node the agent reports
	// how the guest ended; the VMI controller waits for it.
	pods := c.launcherPods(t, vmis["exited"])
	if len(pods) != 1 {
		t.Fatalf("exited has %d launcher pods", len(pods))
	}
	pods[0].Status.Phase = corev1.PodSucceeded
	if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, &pods[0], metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The agent's last heartbeat: it expires in 10 seconds, with no event
	// to tell the controller.
	last := time.Now().Add(-timeout + 10*time.Second).UTC()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1.VirtHandlerHeartbeat: last.Format(time.RFC3339)}}})
	if _, err := nodes.Patch(ctx, "node01", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	consistently(t, time.Second, "before the heartbeat expired", func(ctx context.Context) error {
		n, err := nodes.Get(ctx, "node01", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels[v1.NodeSchedulable] != "true" {
			return fmt.Errorf("node labels %v, want schedulable=true", n.Labels)
		}
		vmi, err := c.vmi(ctx, "exited")
		if err != nil {
			return err
		}
		if vmi.Status.Phase != v1.Running {
			return fmt.Errorf("exited is %s, want Running", vmi.Status.Phase)
		}
		return nil
	})

	failed := c.waitVMIPhase(t, "exited", v1.Failed)
	// Neither tainted nor labeled: other workloads keep the node, and a
	// restarting kubelet re-admits its running pods against their node
	// selector (schedulable=true).
	if n, err := nodes.Get(ctx, "node01", metav1.GetOptions{}); err != nil || n.Labels[v1.NodeSchedulable] != "true" || len(n.Spec.Taints) != 0 {
		t.Errorf("the unresponsive node: labels %v, taints %v, %v; want schedulable=true as the agent left it, no taint", n.Labels, n.Spec.Taints, err)
	}
	// A launcher pod made now avoids node01.
	avoids := func(name string) bool {
		t.Helper()
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: newVM(name, v1.RunStrategyAlways).Spec.Template.Spec}
		created, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, vmi, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var pods []corev1.Pod
		waitFor(t, 30*time.Second, "a launcher pod of "+name, func(context.Context) (bool, error) {
			pods = c.launcherPods(t, created)
			return len(pods) > 0, nil
		})
		a := pods[0].Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			return false
		}
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpNotIn && slices.Contains(f.Values, "node01") {
					return true
				}
			}
		}
		return false
	}
	if !avoids("made-while-unresponsive") {
		t.Error("a launcher pod made while node01's agent is unresponsive may be scheduled there")
	}
	ts := failed.Status.PhaseTransitionTimestamps
	if failed.Status.Reason != node.ReasonNodeUnresponsive || len(ts) == 0 || ts[len(ts)-1].Phase != v1.Failed {
		t.Errorf("exited: reason %q, phase transitions %+v; want %s and a Failed transition last",
			failed.Status.Reason, ts, node.ReasonNodeUnresponsive)
	}

	// A launcher pod deleted on the unresponsive node: the VMI fails, by the
	// node controller or by the VMI controller (reason PodDeleted), which
	// fails every VMI whose pod vanished, on any node; whichever is first.
	pods = c.launcherPods(t, vmis["pod-deleted"])
	zero := int64(0)
	for _, p := range pods {
		if err := c.kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	gone := c.waitVMIPhase(t, "pod-deleted", v1.Failed)
	if r := gone.Status.Reason; r != node.ReasonNodeUnresponsive && r != "PodDeleted" {
		t.Errorf("pod-deleted failed with reason %q", r)
	}

	// The survivor's launcher still runs: it may still run its guest.
	survivor, err := c.vmi(ctx, "survivor")
	if err != nil || survivor.Status.Phase != v1.Running || survivor.UID != vmis["survivor"].UID {
		t.Fatalf("survivor = %v, %v; want the same VMI, Running", survivor.Status.Phase, err)
	}
	pods = c.launcherPods(t, survivor)
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || pods[0].DeletionTimestamp != nil {
		t.Fatalf("survivor's launcher pods = %+v, want one Running", pods)
	}

	// The agent heartbeats again: launcher pods may go there again.
	patch, _ = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1.VirtHandlerHeartbeat: time.Now().UTC().Format(time.RFC3339)}}})
	if _, err := nodes.Patch(ctx, "node01", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The VMI controller sees the heartbeat once its informer's copy of
	// the node has it: a launcher pod made after that may go to node01.
	attempt := 0
	waitFor(t, 10*time.Second, "a launcher pod made after node01's agent heartbeats again to be allowed there", func(context.Context) (bool, error) {
		attempt++
		return !avoids(fmt.Sprintf("made-after-the-heartbeat-%d", attempt)), nil
	})

	// The Node is deleted, and then the survivor's launcher exits: with no
	// node left to report it, the VMI fails.
	if err := nodes.Delete(ctx, "node01", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pods[0].Status.Phase = corev1.PodSucceeded
	if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, &pods[0], metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := c.waitVMIPhase(t, "survivor", v1.Failed).Status.Reason; r != node.ReasonNodeUnresponsive {
		t.Errorf("survivor failed with reason %q, want %s", r, node.ReasonNodeUnresponsive)
	}
	waitFor(t, 30*time.Second, "the survivor's NodeUnresponsive event", func(ctx context.Context) (bool, error) {
		events, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=survivor"})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Reason == node.ReasonNodeUnresponsive && e.Message == "node node01 was deleted, marked as failed" {
				return true, nil
			}
		}
		return false, nil
	})
}
