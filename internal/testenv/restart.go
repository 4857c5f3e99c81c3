package testenv

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RestartKubelet stops the node's kubelet (SIGTERM; its pods' containers
// keep running under containerd), waits down, starts it again with the same
// flags and waits until the Node is Ready again. The restarted kubelet
// re-admits the pods it finds running, as after a node reboot of the
// kubelet alone or a kubelet upgrade.
func (e *Env) RestartKubelet(ctx context.Context, down time.Duration) error {
	n := e.Node
	if n == nil || n.kubelet == nil {
		return errors.New("testenv: no kubelet running")
	}
	idx := -1
	for i, p := range e.procs {
		if p == n.kubelet {
			idx = i
		}
	}
	if idx < 0 {
		return errors.New("testenv: the kubelet is not among the started processes")
	}
	old := n.kubelet
	old.stop(stopGrace)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	next, err := e.startProcess("kubelet", old.cmd.Path, old.cmd.Args[1:]...)
	if err != nil {
		return err
	}
	// startProcess appended it; keep the start order instead.
	e.procs = e.procs[:len(e.procs)-1]
	e.procs[idx] = next
	n.kubelet = next
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// The Node stays Ready for a while after the kubelet stops; wait for a
	// heartbeat newer than the restart.
	restarted := time.Now().Truncate(time.Second) // heartbeats have whole seconds
	return poll(ctx, next, "Node "+n.Name+" Ready after the kubelet restart", func(ctx context.Context) (bool, string) {
		node, err := e.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Before(&metav1.Time{Time: restarted}), c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition"
	})
}
