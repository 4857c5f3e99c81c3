package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
		a.metrics.HeartbeatFailed()
		return
	}
	a.metrics.HeartbeatWritten()
}

// patchNode sets the schedulable and CPU manager labels and the heartbeat
// annotation.
func (a *Agent) patchNode(ctx context.Context, schedulable bool, at time.Time) error {
	cpuManager := strconv.FormatBool(staticCPUManager(ctx, a.cfg.CPUManagerStateFile))
	meta := map[string]any{
		"labels": map[string]string{
			v1.NodeSchedulable:      strconv.FormatBool(schedulable),
			v1.CPUManager:           cpuManager,
			v1.DeprecatedCPUManager: cpuManager,
		},
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

// staticCPUManager reports whether the kubelet's CPU manager checkpoint
// names the static policy. A node without the file (a kubelet that has
// not started, or another path) is not one; an unreadable file is logged.
func staticCPUManager(ctx context.Context, path string) bool {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	var state struct {
		PolicyName string `json:"policyName"`
	}
	if err == nil {
		err = json.Unmarshal(data, &state)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "reading the kubelet's CPU manager state; labelling the node without it", "file", path)
		return false
	}
	return state.PolicyName == "static"
}
