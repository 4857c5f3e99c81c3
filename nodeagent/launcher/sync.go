package launcher

import (
	"context"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Sync defines and starts the domain of vmi when it is not running yet and
// returns the domain's status. The first sync prepares the disks; later
// syncs of a running domain hot-plug the CPU sockets its spec gained
// (hotplug.go) and change nothing else (a new definition would only apply
// after a restart).
func (l *Launcher) Sync(ctx context.Context, vmi *v1.VirtualMachineInstance) (client.Status, error) {
	if string(vmi.UID) != l.cfg.UID {
		return client.Status{}, fmt.Errorf("sync of VMI %s/%s: UID %s is not this launcher's VMI %s", vmi.Namespace, vmi.Name, vmi.UID, l.cfg.UID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final, errFinal
	}
	if l.stopping {
		return l.statusLocked(), nil
	}
	if l.incoming != "" {
		// A migration target: the guest arrives from the source; starting
		// it here too would run it twice.
		return l.statusLocked(), fmt.Errorf("sync of VMI %s: the launcher is a migration target waiting for the incoming domain: %w", l.key(), hypervisor.ErrInvalidState)
	}
	if l.domain == "" {
		vmi := l.withNetworkMACs(vmi)
		opts, created, err := l.prepare(ctx, vmi)
		l.createdAt = append(l.createdAt, created...)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("preparing VMI %s: %w", l.key(), err)
		}
		l.steps.DisksPrepared = time.Now().UTC()
		if err := l.chooseAcceleration(ctx, vmi, &opts); err != nil {
			return l.statusLocked(), fmt.Errorf("VMI %s: %w", l.key(), err)
		}
		if err := l.passtLocked(ctx, vmi, opts.PasstSocket); err != nil {
			return l.statusLocked(), fmt.Errorf("VMI %s: %w", l.key(), err)
		}
		dom, err := domainxml.Convert(vmi, opts)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("converting VMI %s: %w", l.key(), err)
		}
		xml, err := domainxml.Marshal(dom)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("converting VMI %s: %w", l.key(), err)
		}
		defined, err := l.h.Define(ctx, xml)
		if err != nil {
			return l.statusLocked(), fmt.Errorf("defining the domain of VMI %s: %w", l.key(), err)
		}
		l.steps.DomainDefined = time.Now().UTC()
		l.domain, l.opts, l.vmi = defined.Name, opts, vmi.DeepCopy()
		l.last = defined.State
		l.cpuTopology = definedTopology(vmi, dom)
		l.memory = bootMemory(dom)
		select {
		case <-l.synced:
		default:
			close(l.synced)
		}
	}
	if !l.started {
		if err := l.startLocked(ctx); err != nil {
			return l.statusLocked(), err
		}
		if l.steps.DomainStarted.IsZero() {
			l.steps.DomainStarted = time.Now().UTC()
		}
	} else if err := l.hotplugCPUsLocked(ctx, vmi); err != nil {
		return l.statusLocked(), err
	} else if err := l.hotplugMemoryLocked(ctx, vmi); err != nil {
		return l.statusLocked(), err
	}
	if l.started {
		if err := l.syncVolumesLocked(ctx, vmi); err != nil {
			return l.statusLocked(), err
		}
		if err := l.expandDisksLocked(ctx, vmi); err != nil {
			return l.statusLocked(), err
		}
	}
	if st, err := l.h.State(ctx, l.domain); err == nil {
		l.last = st
	}
	return l.statusLocked(), nil
}
