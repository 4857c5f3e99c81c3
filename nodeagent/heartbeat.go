package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// heartbeat marks the node schedulable and records the time, as KubeVirt's
// virt-handler does every minute; the node controller fails the VMIs of
// nodes whose heartbeat stops.
func (a *Agent) heartbeat(ctx context.Context) {
	if err := a.patchNode(ctx, true, a.now()); err != nil {
		klog.FromContext(ctx).Error(err, "heartbeat")
		a.metrics.heartbeatErrors.Inc()
		return
	}
	a.metrics.heartbeat.SetToCurrentTime()
}

// patchNode sets the schedulable label and the heartbeat annotation.
func (a *Agent) patchNode(ctx context.Context, schedulable bool, at time.Time) error {
	meta := map[string]any{
		"labels":      map[string]string{v1.NodeSchedulable: strconv.FormatBool(schedulable)},
		"annotations": map[string]string{v1.VirtHandlerHeartbeat: at.UTC().Format(time.RFC3339)},
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	if _, err := a.cfg.Kube.CoreV1().Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching Node %s: %w", a.cfg.NodeName, err)
	}
	return nil
}
