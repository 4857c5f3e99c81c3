package launcher

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/accesscred"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// startLocked starts the domain paused, attaches the console so no output
// is lost, and resumes it, unless the VMI asks to start paused
// (spec.startStrategy: Paused, what `virtctl start --paused` writes): then
// the guest stays paused until unpaused, reported as paused by the user.
func (l *Launcher) startLocked(ctx context.Context) error {
	st, err := l.h.State(ctx, l.domain)
	if err != nil {
		return fmt.Errorf("starting the domain of VMI %s: %w", l.key(), err)
	}
	if st.State == hypervisor.StateShutoff {
		if err := l.h.Start(ctx, l.domain, hypervisor.StartOptions{Paused: true}); err != nil {
			return fmt.Errorf("starting the domain of VMI %s: %w", l.key(), err)
		}
	}
	l.attachSerial(ctx, l.domain)
	if startsPaused(l.vmi) {
		l.started, l.startedPaused = true, true
		if accesscred.ForGuestAgent(l.vmi) {
			go l.syncAccessCredentials(klog.NewContext(l.runCtx, klog.FromContext(ctx)), l.vmi)
		}
		return nil
	}
	if st, err := l.h.State(ctx, l.domain); err == nil && st.State == hypervisor.StatePaused {
		if err := l.h.Resume(ctx, l.domain); err != nil {
			return fmt.Errorf("resuming the domain of VMI %s: %w", l.key(), err)
		}
	}
	l.started = true
	if accesscred.ForGuestAgent(l.vmi) {
		go l.syncAccessCredentials(klog.NewContext(l.runCtx, klog.FromContext(ctx)), l.vmi)
	}
	return nil
}

// startsPaused reports whether vmi asks its guest to start paused.
func startsPaused(vmi *v1.VirtualMachineInstance) bool {
	return vmi != nil && vmi.Spec.StartStrategy != nil && *vmi.Spec.StartStrategy == v1.StartStrategyPaused
}
