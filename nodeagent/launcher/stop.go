package launcher

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// Shutdown asks the guest to power off and destroys it after the grace
// period; it returns at once.
func (l *Launcher) Shutdown(ctx context.Context) client.Status {
	l.mu.Lock()
	already := l.stopping
	l.stopping = true
	l.mu.Unlock()
	if !already {
		go l.stop(context.WithoutCancel(ctx), true)
	}
	return l.Status()
}

// Kill destroys the domain at once.
func (l *Launcher) Kill(ctx context.Context) client.Status {
	// The stop outlives a caller that gives up waiting (libvirt may be
	// unavailable for a while): ending it half-way would record a stop
	// that did not happen.
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.stop(context.WithoutCancel(ctx), false)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return l.Status()
}

// stop stops the guest: gracefully (ACPI, destroy after the grace period)
// or at once, and ends the launcher. Without a running domain it only ends.
func (l *Launcher) stop(ctx context.Context, graceful bool) {
	l.mu.Lock()
	started, name, final, incoming, cancelMigration := l.started, l.domain, l.final, l.incoming, l.cancelMigration
	l.stopping = true
	l.mu.Unlock()
	if final != nil {
		return
	}
	if cancelMigration != nil {
		cancelMigration() // the guest stays here: abort, then stop it
	}
	if incoming != "" {
		// A migration target told to stop: a half-arrived domain goes too.
		if err := l.h.Destroy(ctx, incoming); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			klog.FromContext(ctx).Error(err, "destroying the incoming domain", "vmi", l.key())
		}
	}
	if !started {
		l.end(ctx, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}, "stopped before the domain started")
		return
	}
	// While libvirt is unavailable the stop is retried until it answers
	// again or the launcher gives the domain up: a stop is never recorded
	// as done while the guest may still run.
	for {
		err := l.halt(ctx, name, graceful)
		if !errors.Is(err, hypervisor.ErrUnavailable) {
			break
		}
		if l.hypervisorLost(err) {
			l.abandon(ctx, err)
			return
		}
		klog.FromContext(ctx).Info("libvirt unavailable, the stop waits for it", "vmi", l.key(), "err", err.Error())
		select {
		case <-l.done: // given up by poll meanwhile
			return
		case <-time.After(time.Second):
		}
	}
	st, err := l.h.State(ctx, name)
	if err != nil {
		st = hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonDestroyed}
	}
	l.end(ctx, st, "")
}

// halt stops the guest, gracefully or at once; an error matching
// hypervisor.ErrUnavailable when libvirt did not answer.
func (l *Launcher) halt(ctx context.Context, name string, graceful bool) error {
	var err error
	if graceful {
		_, err = hypervisor.StopGracefully(ctx, l.h, name, l.cfg.GracePeriod, l.cfg.PollInterval)
	} else {
		err = l.h.Destroy(ctx, name)
	}
	l.hypervisorLost(err)
	if err == nil || errors.Is(err, hypervisor.ErrNotFound) || errors.Is(err, hypervisor.ErrUnavailable) {
		return err
	}
	klog.FromContext(ctx).Error(err, "stopping the domain", "vmi", l.key())
	derr := l.h.Destroy(ctx, name)
	l.hypervisorLost(derr)
	if derr != nil && !errors.Is(derr, hypervisor.ErrNotFound) {
		klog.FromContext(ctx).Error(derr, "destroying the domain", "vmi", l.key())
	}
	if errors.Is(derr, hypervisor.ErrUnavailable) {
		return derr
	}
	return nil
}
