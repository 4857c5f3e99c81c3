package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// ReasonNodeUnresponsive is the status.reason of the VMIs the controller
// fails, and the reason of their events (KubeVirt's).
const ReasonNodeUnresponsive = "NodeUnresponsive"

// Unresponsive reports whether the node agent on node has stopped
// heartbeating as of now: when the node is nil (deleted), or when its
// kubevirt.io/heartbeat annotation is timeout or more old. A node without a
// readable heartbeat is not unresponsive, as in KubeVirt: its agent has not
// started yet (or never runs there).
//
// For a responsive node with a heartbeat, recheck is how long until it
// expires: the time to look again if nothing else happens. It is zero
// otherwise.
func Unresponsive(node *corev1.Node, timeout time.Duration, now time.Time) (unresponsive bool, recheck time.Duration) {
	if node == nil {
		return true, 0
	}
	if at, err := time.Parse(time.RFC3339, node.Annotations[v1.VirtHandlerHeartbeat]); err == nil {
		if left := at.Add(timeout).Sub(now); left > 0 {
			return false, left
		}
		return true, 0
	}
	return false, 0
}

func (c *Controller) sync(ctx context.Context, key string) error {
	node, err := c.nodeLister.Get(key)
	if apierrors.IsNotFound(err) {
		node, err = nil, nil
	}
	if err != nil {
		return err
	}
	unresponsive, recheck := Unresponsive(node, c.timeout, c.now())
	if !unresponsive {
		if node != nil && HasUnresponsiveTaint(node) {
			if err := c.setUnresponsiveTaint(ctx, node, false); err != nil {
				return err
			}
		}
		if recheck > 0 {
			return reconcile.After(recheck)
		}
		return nil
	}
	// The node is not tainted: the VMI controller keeps new launcher pods
	// off it (vmi.Config.Nodes), and other workloads are not concerned.
	// A taint an earlier version put there goes.
	if node != nil && HasUnresponsiveTaint(node) {
		if err := c.setUnresponsiveTaint(ctx, node, false); err != nil {
			return err
		}
	}
	return c.failStranded(ctx, key, node == nil)
}

// UnresponsiveTaint is the taint earlier versions of the controller put on
// a node whose node agent stopped heartbeating:
// kubevirt.io/schedulable=false, NoSchedule. It kept every workload off the
// node, not only launcher pods; the controller now removes it where it
// finds it, and the VMI controller keeps new launcher pods off such nodes
// instead (vmi.Config.Nodes).
//
// KubeVirt labels such a node kubevirt.io/schedulable=false. Launcher pods
// select kubevirt.io/schedulable=true, and a kubelet re-admits its pods
// against their node selectors when it restarts, so a kubelet restart on that
// node killed every VM still running there (KubeVirt's bug #11843); vmkit
// leaves the label to the node agent.
func UnresponsiveTaint() corev1.Taint {
	return corev1.Taint{Key: v1.NodeSchedulable, Value: "false", Effect: corev1.TaintEffectNoSchedule}
}

// HasUnresponsiveTaint reports whether node carries UnresponsiveTaint.
func HasUnresponsiveTaint(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, isUnresponsiveTaint)
}

// isUnresponsiveTaint matches UnresponsiveTaint by key and effect.
func isUnresponsiveTaint(t corev1.Taint) bool {
	u := UnresponsiveTaint()
	return u.MatchTaint(&t)
}

// setUnresponsiveTaint adds UnresponsiveTaint to the node's taints, or
// removes it, unless the node changed since the cache saw it (a heartbeat
// may have come; the node's event brings it back).
func (c *Controller) setUnresponsiveTaint(ctx context.Context, node *corev1.Node, on bool) error {
	taint := UnresponsiveTaint()
	taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), isUnresponsiveTaint)
	if on {
		taints = append(taints, taint)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return err
	}
	log := klog.FromContext(ctx).WithValues("node", node.Name, "heartbeat", node.Annotations[v1.VirtHandlerHeartbeat])
	what := "tainting"
	if on {
		log.Info("node agent is not responsive: tainting the node so no new launcher pod is scheduled there")
	} else {
		what = "untainting"
		log.Info("node agent is heartbeating again: removing the node's taint")
	}
	if _, err := c.kube.Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("%s Node %s (%s): %w", what, node.Name, taint.ToString(), err)
	}
	return nil
}

// failStranded fails the node's VMIs that are neither final nor being
// deleted and whose launcher pods do not run. For a node missing from the cache (deleted), it first
// checks that the API server has no such node either.
func (c *Controller) failStranded(ctx context.Context, nodeName string, deleted bool) error {
	objs, err := c.vmiIndexer.ByIndex(vmisByNodeIndex, nodeName)
	if err != nil {
		return err
	}
	var stranded []*v1.VirtualMachineInstance
	for _, o := range objs {
		vmi, ok := o.(*v1.VirtualMachineInstance)
		if !ok || vmi.IsFinal() || vmi.Status.NodeName != nodeName {
			continue
		}
		if vmi.DeletionTimestamp != nil {
			// Going away already: failing it would only count as a
			// failed start against its VirtualMachine.
			continue
		}
		if c.stale.Stale(vmi.Namespace+"/"+vmi.Name, vmi.ResourceVersion) {
			continue // our own write has not reached the cache
		}
		runs, err := c.launcherRuns(vmi)
		if err != nil {
			return err
		}
		if !runs {
			stranded = append(stranded, vmi)
		}
	}
	if len(stranded) == 0 {
		return nil
	}
	if deleted {
		_, err := c.kube.Get(ctx, nodeName, metav1.GetOptions{})
		switch {
		case err == nil:
			return nil // the cache is behind; the Node's event brings us back
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("looking up Node %s: %w", nodeName, err)
		}
	}
	slices.SortFunc(stranded, func(a, b *v1.VirtualMachineInstance) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var errs []error
	for _, vmi := range stranded {
		if err := c.fail(ctx, nodeName, deleted, vmi); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// launcherRuns reports whether a launcher pod of the VMI, on any node, is
// in phase Running: its guest may be running.
func (c *Controller) launcherRuns(vmi *v1.VirtualMachineInstance) (bool, error) {
	pods, err := podindex.Of(c.podIndexer, vmi)
	if err != nil {
		return false, err
	}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning {
			return true, nil
		}
	}
	return false, nil
}

// fail moves the cached VMI to Failed with reason NodeUnresponsive, in one
// Update (the VMI has no status subresource); a conflict requeues the node.
func (c *Controller) fail(ctx context.Context, nodeName string, deleted bool, cached *v1.VirtualMachineInstance) error {
	key := cached.Namespace + "/" + cached.Name
	vmi := cached.DeepCopy()
	vmi.Status.Phase = v1.Failed
	vmi.Status.Reason = ReasonNodeUnresponsive
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: v1.Failed, PhaseTransitionTimestamp: metav1.NewTime(c.now().Truncate(time.Second)),
	})
	updated, err := c.client.VirtualMachineInstances(vmi.Namespace).Update(ctx, vmi, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("failing VirtualMachineInstance %s of node %s: %w", key, nodeName, err)
	}
	c.stale.Wrote(key, cached.ResourceVersion)
	msg := fmt.Sprintf("virt-handler on node %s is not responsive, marked as failed", nodeName)
	if deleted {
		msg = fmt.Sprintf("node %s was deleted, marked as failed", nodeName)
	}
	klog.FromContext(ctx).Info("failing a VMI stranded on an unresponsive node", "vmi", key, "node", nodeName, "nodeDeleted", deleted)
	c.recorder.Event(updated, corev1.EventTypeNormal, ReasonNodeUnresponsive, msg)
	if c.onPhaseChange != nil {
		c.onPhaseChange(updated, v1.Failed)
	}
	return nil
}
