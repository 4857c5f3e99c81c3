package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// DefaultHypervisorTimeout is how long the launcher waits for an
// unavailable libvirt to come back before it gives the domain up.
//
// libvirtd dying inside the launcher pod does not take the guest with it:
// QEMU keeps running, cmd/virt-launcher restarts the daemon, libvirt
// re-attaches to the QEMU it finds in its state files and the hypervisor
// reconnects. Meanwhile every call fails with hypervisor.ErrUnavailable:
// commands answer with an error naming libvirt, the status keeps the
// domain's last state (the guest runs) with a message saying libvirt is
// unavailable, and a stop requested during the outage waits for libvirt
// instead of being recorded as done. When libvirt stays unavailable for
// Config.HypervisorTimeout, the launcher kills the guest
// (Config.KillDomain) and ends with state Shutoff, reason
// hypervisor.ReasonLibvirtUnavailable, so the VMI fails with that reason
// instead of showing Running while nothing can stop it.
const DefaultHypervisorTimeout = 60 * time.Second

// hypervisorLost records the outcome of a hypervisor call and reports
// whether the hypervisor has now been unavailable for longer than
// Config.HypervisorTimeout. Any answer from libvirt (success or another
// error) ends an outage; a call that timed out says nothing either way.
func (l *Launcher) hypervisorLost(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case errors.Is(err, hypervisor.ErrUnavailable):
		if l.unavailableSince.IsZero() {
			l.unavailableSince = time.Now()
		}
		return time.Since(l.unavailableSince) >= l.cfg.HypervisorTimeout
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
	default:
		l.unavailableSince = time.Time{}
	}
	return false
}

// abandon gives the domain up after libvirt stayed unavailable: it kills
// the guest without libvirt and ends with reason LibvirtUnavailable.
func (l *Launcher) abandon(ctx context.Context, cause error) {
	l.mu.Lock()
	if l.final != nil || l.abandoned {
		l.mu.Unlock()
		return
	}
	l.abandoned = true
	since := l.unavailableSince
	l.mu.Unlock()
	log := klog.FromContext(ctx).WithValues("vmi", l.key())
	msg := fmt.Sprintf("libvirt was unavailable for %v (%v): the launcher gave the domain up", time.Since(since).Round(time.Second), cause)
	switch {
	case l.cfg.KillDomain == nil:
		msg += "; the guest was not killed: the launcher does not own its libvirt"
	default:
		if err := l.cfg.KillDomain(context.WithoutCancel(ctx)); err != nil {
			log.Error(err, "killing the guest without libvirt")
			msg += fmt.Sprintf("; killing the guest: %v", err)
		} else {
			msg += " and killed the guest"
		}
	}
	log.Info("giving the domain up", "message", msg)
	l.end(ctx, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonLibvirtUnavailable}, msg)
}

// unavailableMessage is the status message during an outage, "" without
// one. l.mu is held.
func (l *Launcher) unavailableMessageLocked() string {
	if l.unavailableSince.IsZero() {
		return ""
	}
	return fmt.Sprintf("libvirt unavailable since %s; the launcher gives the domain up after %v", l.unavailableSince.UTC().Format(time.RFC3339), l.cfg.HypervisorTimeout)
}
