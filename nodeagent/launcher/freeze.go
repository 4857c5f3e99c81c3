package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// Freeze freezes the guest's file systems through the QEMU guest agent
// (guest-fsfreeze-freeze), as KubeVirt does before a snapshot; a guest
// whose file systems are frozen already is left as it is. With
// unfreezeTimeout > 0 the launcher thaws them after that long unless
// Unfreeze (or another Freeze, which sets a new deadline) came first, so a
// client that dies does not leave the guest frozen. Errors are
// GuestAgentCommand's.
func (l *Launcher) Freeze(ctx context.Context, unfreezeTimeout time.Duration) (client.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, client.FreezeTimeout)
	defer cancel()
	frozen, err := l.fsFrozen(ctx)
	if err != nil {
		return l.Status(), err
	}
	if !frozen {
		if _, err := l.agentCommand(ctx, "guest-fsfreeze-freeze", client.FreezeTimeout); err != nil {
			return l.Status(), err
		}
	}
	l.cancelThaw() // a deadline of an earlier Freeze no longer applies
	if unfreezeTimeout > 0 {
		l.mu.Lock()
		gen := l.thawGen
		l.thawTimer = time.AfterFunc(unfreezeTimeout, func() { l.autoThaw(gen, unfreezeTimeout) })
		l.mu.Unlock()
	}
	return l.Status(), nil
}

// Unfreeze thaws the guest's file systems (guest-fsfreeze-thaw) and cancels
// the automatic thaw a Freeze set up; thawed file systems are left as they
// are. Errors are GuestAgentCommand's.
func (l *Launcher) Unfreeze(ctx context.Context) (client.Status, error) {
	l.cancelThaw()
	return l.Status(), l.thaw(ctx)
}

func (l *Launcher) thaw(ctx context.Context) error {
	frozen, err := l.fsFrozen(ctx)
	if err != nil || !frozen {
		return err
	}
	_, err = l.agentCommand(ctx, "guest-fsfreeze-thaw", l.agentTimeout())
	return err
}

// cancelThaw stops the automatic thaw, if one is pending: a timer that
// fired already finds thawGen moved on and does nothing.
func (l *Launcher) cancelThaw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.thawGen++
	if l.thawTimer != nil {
		l.thawTimer.Stop()
		l.thawTimer = nil
	}
}

// autoThaw thaws the file systems when the unfreeze deadline of the Freeze
// with generation gen passed and nothing came since.
func (l *Launcher) autoThaw(gen uint64, after time.Duration) {
	l.mu.Lock()
	current := gen == l.thawGen && l.final == nil
	if current {
		l.thawTimer = nil
	}
	l.mu.Unlock()
	if !current {
		return
	}
	log := klog.FromContext(l.runCtx).WithValues("vmi", l.key())
	log.Info("thawing the guest's file systems: no unfreeze came", "unfreezeTimeout", after)
	if err := l.thaw(l.runCtx); err != nil {
		log.Error(err, "thawing the guest's file systems")
	}
}

// fsFrozen asks the guest agent whether the guest's file systems are
// frozen (guest-fsfreeze-status).
func (l *Launcher) fsFrozen(ctx context.Context) (bool, error) {
	raw, err := l.agentCommand(ctx, "guest-fsfreeze-status", l.agentTimeout())
	if err != nil {
		return false, err
	}
	var status string
	if err := json.Unmarshal(raw, &status); err != nil {
		return false, fmt.Errorf("guest-fsfreeze-status on VMI %s: %.100q is not a status: %w", l.key(), raw, err)
	}
	return status == "frozen", nil
}
