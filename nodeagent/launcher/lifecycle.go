package launcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/qga"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// SoftReboot asks the guest to restart, through the QEMU guest agent or by
// an ACPI power button press (see hypervisor.RebootMethod), and returns
// without waiting for it. ACPI is refused (hypervisor.ErrInvalidState) when
// the VMI disables it (spec.domain.features.acpi.enabled=false), and so is
// a domain that is not running (paused, not started); through an agent that
// does not answer within Config.GuestAgentTimeout it fails with
// hypervisor.ErrAgentUnavailable.
func (l *Launcher) SoftReboot(ctx context.Context, method hypervisor.RebootMethod) (client.Status, error) {
	l.mu.Lock()
	acpi := l.vmi == nil || acpiEnabled(l.vmi)
	l.mu.Unlock()
	domain, err := l.startedDomain("soft reboot")
	if err != nil {
		return l.Status(), err
	}
	switch method {
	case hypervisor.RebootGuestAgent:
	case hypervisor.RebootACPI:
		if !acpi {
			return l.Status(), fmt.Errorf("soft reboot of VMI %s: ACPI is disabled (spec.domain.features.acpi.enabled): %w", l.key(), hypervisor.ErrInvalidState)
		}
	default:
		return l.Status(), fmt.Errorf("soft reboot of VMI %s: %w %q", l.key(), errUnknownRebootMethod, method)
	}
	// Not under l.mu: the guest agent may take its time.
	timeout := l.agentTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := l.h.Reboot(ctx, domain, method); err != nil {
		if method == hypervisor.RebootGuestAgent {
			err = qga.TimedOut(err, timeout)
		}
		return l.Status(), fmt.Errorf("soft reboot of VMI %s: %w", l.key(), err)
	}
	return l.Status(), nil
}

// errUnknownRebootMethod: a reboot method that is not a hypervisor.RebootMethod.
var errUnknownRebootMethod = errors.New("unknown reboot method")

// acpiEnabled reports whether the VMI's guest has ACPI: unless
// spec.domain.features.acpi.enabled is false.
func acpiEnabled(vmi *v1.VirtualMachineInstance) bool {
	f := vmi.Spec.Domain.Features
	return f == nil || f.ACPI.Enabled == nil || *f.ACPI.Enabled
}

// Pause stops the guest's vCPUs.
func (l *Launcher) Pause(ctx context.Context) (client.Status, error) {
	return l.lifecycle(ctx, "pause", l.h.Pause)
}

// Unpause resumes the guest's vCPUs.
func (l *Launcher) Unpause(ctx context.Context) (client.Status, error) {
	return l.lifecycle(ctx, "unpause", l.h.Resume)
}

// Reset resets the guest at once, as KubeVirt's reset does
// (hypervisor.Hypervisor.Reset): it boots again in the same QEMU process,
// without asking it. A paused guest is reset and stays paused; a domain not
// started yet, or ended, is a 409.
func (l *Launcher) Reset(ctx context.Context) (client.Status, error) {
	return l.lifecycle(ctx, "reset", l.h.Reset)
}

func (l *Launcher) lifecycle(ctx context.Context, op string, fn func(context.Context, string) error) (client.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final, errFinal
	}
	if !l.started {
		return l.statusLocked(), fmt.Errorf("%s VMI %s: %w", op, l.key(), hypervisor.ErrInvalidState)
	}
	if err := fn(ctx, l.domain); err != nil {
		return l.statusLocked(), fmt.Errorf("%s VMI %s: %w", op, l.key(), err)
	}
	if st, err := l.h.State(ctx, l.domain); err == nil {
		l.last = st
	}
	return l.statusLocked(), nil
}
