package launcher

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/passt"
)

// startPasstLocked starts passt on socket in the pod's network namespace,
// with the port arguments the node agent sent (NetworkInterface.Passt),
// and waits until it listens (package passt). It runs for as long as the
// launcher runs; a passt already running is kept.
func (l *Launcher) startPasstLocked(ctx context.Context, socket string) error {
	if l.passt != nil {
		if exited, err := l.passt.Exited(); exited {
			return fmt.Errorf("passt, which connects interface %s to the pod network, exited: %v", l.passtIface, err)
		}
		return nil
	}
	p, err := passt.Start(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("vmi", l.key())), l.runCtx, socket, l.passtIface, l.passtArgs)
	if err != nil {
		return err
	}
	l.passt = p
	return nil
}
