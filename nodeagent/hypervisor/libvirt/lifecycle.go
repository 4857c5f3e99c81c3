package libvirt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// Define implements hypervisor.Hypervisor.
func (h *Hypervisor) Define(ctx context.Context, domainXML string) (hypervisor.Domain, error) {
	var out hypervisor.Domain
	err := h.call(ctx, "define", "domain", func(c *golibvirt.Connect) error {
		dom, err := c.DomainDefineXML(domainXML)
		if err != nil {
			return err
		}
		defer dom.Free()
		out, err = describe(dom)
		return err
	})
	return out, err
}

// Start implements hypervisor.Hypervisor.
func (h *Hypervisor) Start(ctx context.Context, name string, opts hypervisor.StartOptions) error {
	var flags golibvirt.DomainCreateFlags
	if opts.Paused {
		flags |= golibvirt.DOMAIN_START_PAUSED
	}
	return h.onDomain(ctx, "start", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "start", golibvirt.DOMAIN_SHUTOFF, golibvirt.DOMAIN_CRASHED); err != nil {
			return err
		}
		return d.CreateWithFlags(flags)
	})
}

// Shutdown implements hypervisor.Hypervisor.
func (h *Hypervisor) Shutdown(ctx context.Context, name string) error {
	return h.onDomain(ctx, "shutdown", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "shut down", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED, golibvirt.DOMAIN_SHUTDOWN); err != nil {
			return err
		}
		return d.Shutdown()
	})
}

// Destroy implements hypervisor.Hypervisor.
func (h *Hypervisor) Destroy(ctx context.Context, name string) error {
	return h.onDomain(ctx, "destroy", name, func(d *golibvirt.Domain) error {
		err := d.Destroy()
		var lerr golibvirt.Error
		if errors.As(err, &lerr) && lerr.Code == golibvirt.ERR_OPERATION_INVALID {
			if st, _, serr := d.GetState(); serr == nil && st == golibvirt.DOMAIN_SHUTOFF {
				return nil
			}
		}
		return err
	})
}

// Pause implements hypervisor.Hypervisor.
func (h *Hypervisor) Pause(ctx context.Context, name string) error {
	return h.onDomain(ctx, "pause", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "pause", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.Suspend()
	})
}

// Resume implements hypervisor.Hypervisor.
func (h *Hypervisor) Resume(ctx context.Context, name string) error {
	return h.onDomain(ctx, "resume", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "resume", golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.Resume()
	})
}

// Reboot implements hypervisor.Hypervisor with virDomainReboot:
// DOMAIN_REBOOT_GUEST_AGENT sends the guest agent guest-shutdown with mode
// reboot; DOMAIN_REBOOT_ACPI_POWER_BTN makes QEMU press the power button
// and libvirt restart the guest (a reset, the same QEMU process) when it
// powers off. A guest that ignores the button keeps running, and libvirt
// keeps the restart pending: its next power-off reboots it too (a graceful
// stop through Shutdown clears it).
func (h *Hypervisor) Reboot(ctx context.Context, name string, method hypervisor.RebootMethod) error {
	var flags golibvirt.DomainRebootFlagValues
	switch method {
	case hypervisor.RebootGuestAgent:
		flags = golibvirt.DOMAIN_REBOOT_GUEST_AGENT
	case hypervisor.RebootACPI:
		flags = golibvirt.DOMAIN_REBOOT_ACPI_POWER_BTN
	default:
		return fmt.Errorf("reboot %s: unknown method %q", name, method)
	}
	return h.onDomain(ctx, "reboot", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "reboot", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED); err != nil {
			return err
		}
		return d.Reboot(flags)
	})
}

// Reset implements hypervisor.Hypervisor with virDomainReset, as
// KubeVirt's launcher does: QEMU resets the machine (system_reset) and the
// guest boots again in the same process, without an ACPI event or the
// guest's consent.
func (h *Hypervisor) Reset(ctx context.Context, name string) error {
	return h.onDomain(ctx, "reset", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "reset", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.Reset(0)
	})
}

// State implements hypervisor.Hypervisor.
func (h *Hypervisor) State(ctx context.Context, name string) (hypervisor.DomainState, error) {
	var out hypervisor.DomainState
	err := h.onDomain(ctx, "state", name, func(d *golibvirt.Domain) error {
		st, reason, err := d.GetState()
		if err != nil {
			return err
		}
		out = domainState(st, reason)
		return nil
	})
	return out, err
}

// nvramUndefineFlag is how an undefine treats the domain's EFI variable
// store: removed with the domain when it is in domainxml.DefaultNVRAMDir,
// the launcher's own directory; kept elsewhere, where only a persistent
// store (firmware.bootloader.efi.persistent, on the VM's backend storage)
// is put.
func nvramUndefineFlag(d *golibvirt.Domain) golibvirt.DomainUndefineFlagsValues {
	desc, err := d.GetXMLDesc(golibvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return golibvirt.DOMAIN_UNDEFINE_NVRAM
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(desc); err != nil || def.OS == nil || def.OS.NVRam == nil || def.OS.NVRam.NVRam == "" {
		return golibvirt.DOMAIN_UNDEFINE_NVRAM
	}
	if filepath.Dir(def.OS.NVRam.NVRam) == filepath.Clean(domainxml.DefaultNVRAMDir) {
		return golibvirt.DOMAIN_UNDEFINE_NVRAM
	}
	return golibvirt.DOMAIN_UNDEFINE_KEEP_NVRAM
}

// Undefine implements hypervisor.Hypervisor.
func (h *Hypervisor) Undefine(ctx context.Context, name string) error {
	return h.onDomain(ctx, "undefine", name, func(d *golibvirt.Domain) error {
		active, err := d.IsActive()
		if err != nil {
			return err
		}
		if active {
			return &wrapped{"domain is running; destroy it first", hypervisor.ErrInvalidState}
		}
		err = d.UndefineFlags(nvramUndefineFlag(d))
		var lerr golibvirt.Error
		if errors.As(err, &lerr) && (lerr.Code == golibvirt.ERR_NO_SUPPORT || lerr.Code == golibvirt.ERR_INVALID_ARG) {
			// Drivers without NVRAM (the test driver) reject the flag.
			err = d.Undefine()
		}
		return err
	})
}

// List implements hypervisor.Hypervisor.
func (h *Hypervisor) List(ctx context.Context, vmiUID string) ([]hypervisor.Domain, error) {
	var out []hypervisor.Domain
	err := h.call(ctx, "list", vmiUID, func(c *golibvirt.Connect) error {
		out = out[:0]
		doms, err := c.ListAllDomains(0)
		if err != nil {
			return err
		}
		defer func() {
			for i := range doms {
				_ = doms[i].Free()
			}
		}()
		for i := range doms {
			meta, err := metadata(&doms[i])
			if err != nil {
				if errors.Is(err, domainxml.ErrNoMetadata) || isNoDomain(err) {
					continue
				}
				return err
			}
			if vmiUID != "" && meta.UID != vmiUID {
				continue
			}
			d, err := describe(&doms[i])
			if err != nil {
				if isNoDomain(err) { // undefined while we looked
					continue
				}
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// describe reads a domain's name, UUID, metadata and state.
func describe(dom *golibvirt.Domain) (hypervisor.Domain, error) {
	var d hypervisor.Domain
	var err error
	if d.Name, err = dom.GetName(); err != nil {
		return d, err
	}
	if d.UUID, err = dom.GetUUIDString(); err != nil {
		return d, err
	}
	if d.VMI, err = metadata(dom); err != nil && !errors.Is(err, domainxml.ErrNoMetadata) {
		return d, err
	}
	st, reason, err := dom.GetState()
	if err != nil {
		return d, err
	}
	d.State = domainState(st, reason)
	return d, nil
}

// metadata reads a domain's vmkit metadata element.
func metadata(dom *golibvirt.Domain) (domainxml.Metadata, error) {
	s, err := dom.GetMetadata(golibvirt.DOMAIN_METADATA_ELEMENT, domainxml.MetadataNamespace, golibvirt.DOMAIN_AFFECT_CURRENT)
	if err != nil {
		var lerr golibvirt.Error
		if errors.As(err, &lerr) && lerr.Code == golibvirt.ERR_NO_DOMAIN_METADATA {
			return domainxml.Metadata{}, domainxml.ErrNoMetadata
		}
		return domainxml.Metadata{}, err
	}
	return domainxml.UnmarshalMetadata(s)
}

func isNoDomain(err error) bool {
	var lerr golibvirt.Error
	return errors.As(err, &lerr) && lerr.Code == golibvirt.ERR_NO_DOMAIN
}

// domainState maps libvirt's state and reason codes.
func domainState(st golibvirt.DomainState, reason int) hypervisor.DomainState {
	switch st {
	case golibvirt.DOMAIN_RUNNING:
		r := hypervisor.ReasonUnknown
		switch golibvirt.DomainRunningReason(reason) {
		case golibvirt.DOMAIN_RUNNING_BOOTED:
			r = hypervisor.ReasonBooted
		case golibvirt.DOMAIN_RUNNING_MIGRATED:
			r = hypervisor.ReasonMigrated
		case golibvirt.DOMAIN_RUNNING_RESTORED:
			r = hypervisor.ReasonRestored
		case golibvirt.DOMAIN_RUNNING_UNPAUSED:
			r = hypervisor.ReasonUnpaused
		}
		return hypervisor.DomainState{State: hypervisor.StateRunning, Reason: r}
	case golibvirt.DOMAIN_PAUSED:
		r := hypervisor.ReasonUnknown
		switch golibvirt.DomainPausedReason(reason) {
		case golibvirt.DOMAIN_PAUSED_USER:
			r = hypervisor.ReasonUser
		case golibvirt.DOMAIN_PAUSED_STARTING_UP:
			r = hypervisor.ReasonStartingUp
		case golibvirt.DOMAIN_PAUSED_IOERROR:
			r = hypervisor.ReasonIOError
		case golibvirt.DOMAIN_PAUSED_WATCHDOG:
			r = hypervisor.ReasonWatchdog
		case golibvirt.DOMAIN_PAUSED_MIGRATION:
			r = hypervisor.ReasonMigrated
		case golibvirt.DOMAIN_PAUSED_CRASHED:
			r = hypervisor.ReasonCrashed
		case golibvirt.DOMAIN_PAUSED_SHUTTING_DOWN:
			r = hypervisor.ReasonShutdown
		}
		return hypervisor.DomainState{State: hypervisor.StatePaused, Reason: r}
	case golibvirt.DOMAIN_SHUTOFF:
		r := hypervisor.ReasonUnknown
		switch golibvirt.DomainShutoffReason(reason) {
		case golibvirt.DOMAIN_SHUTOFF_SHUTDOWN:
			r = hypervisor.ReasonShutdown
		case golibvirt.DOMAIN_SHUTOFF_DESTROYED:
			r = hypervisor.ReasonDestroyed
		case golibvirt.DOMAIN_SHUTOFF_CRASHED:
			r = hypervisor.ReasonCrashed
		case golibvirt.DOMAIN_SHUTOFF_MIGRATED:
			r = hypervisor.ReasonMigrated
		case golibvirt.DOMAIN_SHUTOFF_SAVED:
			r = hypervisor.ReasonSaved
		case golibvirt.DOMAIN_SHUTOFF_FAILED:
			r = hypervisor.ReasonFailed
		case golibvirt.DOMAIN_SHUTOFF_DAEMON:
			r = hypervisor.ReasonDaemon
		}
		return hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: r}
	case golibvirt.DOMAIN_SHUTDOWN:
		r := hypervisor.ReasonUnknown
		if golibvirt.DomainShutdownReason(reason) == golibvirt.DOMAIN_SHUTDOWN_USER {
			r = hypervisor.ReasonUser
		}
		return hypervisor.DomainState{State: hypervisor.StateShuttingDown, Reason: r}
	case golibvirt.DOMAIN_CRASHED:
		return hypervisor.DomainState{State: hypervisor.StateCrashed, Reason: hypervisor.ReasonCrashed}
	case golibvirt.DOMAIN_BLOCKED:
		return hypervisor.DomainState{State: hypervisor.StateBlocked, Reason: hypervisor.ReasonUnknown}
	case golibvirt.DOMAIN_PMSUSPENDED:
		return hypervisor.DomainState{State: hypervisor.StatePMSuspended, Reason: hypervisor.ReasonUnknown}
	}
	return hypervisor.DomainState{State: hypervisor.StateNoState, Reason: hypervisor.ReasonUnknown}
}
