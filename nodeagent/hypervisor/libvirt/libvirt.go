// Package libvirt implements hypervisor.Hypervisor with libvirt through
// libvirt.org/go/libvirt. It is the only package of the module that uses
// cgo: building it needs libvirt's headers (Debian package libvirt-dev) and
// pkg-config; running it needs libvirt's client library and a libvirt daemon
// (hack/setup-libvirt.sh installs all of them).
//
// One connection is opened and shared by all calls. When libvirtd restarts
// the connection breaks; the next call notices, reconnects and is retried
// once on the new connection. A call that finds libvirtd gone (no
// connection can be opened, or the new one dies too) fails with an error
// naming libvirt that matches hypervisor.ErrUnavailable. Every call is
// bounded by its context or, when the context has no deadline, by
// Options.CallTimeout. libvirt's C calls
// cannot be interrupted: a call that times out returns at once while the C
// call finishes in the background.
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"time"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// DefaultURI is the local privileged libvirt daemon's QEMU driver.
const DefaultURI = "qemu:///system"

// Options configure a Hypervisor.
type Options struct {
	// URI of the libvirt daemon; DefaultURI when empty. "test:///default"
	// is libvirt's built-in mock driver: no daemon, no guests.
	URI string
	// CallTimeout bounds a call whose context has no deadline;
	// hypervisor.DefaultCallTimeout when zero.
	CallTimeout time.Duration
}

// Hypervisor is a hypervisor.Hypervisor backed by libvirt.
type Hypervisor struct {
	uri     string
	timeout time.Duration

	mu     sync.Mutex
	conn   *golibvirt.Connect
	closed bool
}

var _ hypervisor.Hypervisor = (*Hypervisor)(nil)

// New connects to libvirt at opts.URI. The first connection after libvirtd
// starts can take several seconds while it probes QEMU; ctx bounds it.
func New(ctx context.Context, opts Options) (*Hypervisor, error) {
	h := &Hypervisor{uri: opts.URI, timeout: opts.CallTimeout}
	if h.uri == "" {
		h.uri = DefaultURI
	}
	if h.timeout <= 0 {
		h.timeout = hypervisor.DefaultCallTimeout
	}
	err := h.call(ctx, "connect", h.uri, func(*golibvirt.Connect) error { return nil })
	if err != nil {
		return nil, err
	}
	return h, nil
}

// URI returns the libvirt URI the hypervisor is connected to.
func (h *Hypervisor) URI() string { return h.uri }

// Close closes the connection. Calls after Close fail.
func (h *Hypervisor) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.conn == nil {
		return nil
	}
	_, err := h.conn.Close()
	h.conn = nil
	return err
}

// connection returns the open connection, opening a new one when there is
// none or the old one died (libvirtd restarted).
func (h *Hypervisor) connection() (*golibvirt.Connect, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("hypervisor is closed")
	}
	if h.conn != nil {
		if alive, err := h.conn.IsAlive(); err == nil && alive {
			return h.conn, nil
		}
		_, _ = h.conn.Close()
		h.conn = nil
	}
	conn, err := golibvirt.NewConnect(h.uri)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", h.uri, err)
	}
	h.conn = conn
	return conn, nil
}

// alive reports whether conn is still the open, working connection.
func (h *Hypervisor) alive(conn *golibvirt.Connect) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != conn {
		return false
	}
	ok, err := conn.IsAlive()
	return err == nil && ok
}

// call runs fn on the connection, bounded by ctx or the call timeout. When
// fn fails because the connection died, it reconnects and runs fn again.
func (h *Hypervisor) call(ctx context.Context, op, name string, fn func(*golibvirt.Connect) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	done := make(chan error, 1)
	go func() {
		conn, err := h.connection()
		if err != nil {
			done <- h.unavailable(err)
			return
		}
		err = fn(conn)
		if err != nil && !h.alive(conn) {
			conn, cerr := h.connection()
			if cerr != nil {
				done <- h.unavailable(cerr)
				return
			}
			if err = fn(conn); err != nil && !h.alive(conn) {
				err = h.unavailable(err)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if errors.Is(err, hypervisor.ErrUnavailable) {
			return fmt.Errorf("%s %s: %w", op, name, err)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", op, name, translate(err))
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: %w", op, name, ctx.Err())
	}
}

// unavailable is err of a call that found no live connection to libvirt
// (libvirtd not running, or died under the call): it names libvirt and
// matches hypervisor.ErrUnavailable.
func (h *Hypervisor) unavailable(err error) error {
	var lerr golibvirt.Error
	msg := err.Error()
	if errors.As(err, &lerr) {
		msg = lerr.Message
	}
	return &wrapped{"libvirt at " + h.uri + " is unavailable: " + msg, hypervisor.ErrUnavailable}
}

// onDomain runs fn on the named domain.
func (h *Hypervisor) onDomain(ctx context.Context, op, name string, fn func(*golibvirt.Domain) error) error {
	return h.call(ctx, op, name, func(c *golibvirt.Connect) error {
		dom, err := c.LookupDomainByName(name)
		if err != nil {
			return err
		}
		defer dom.Free()
		return fn(dom)
	})
}

// translate maps libvirt's error codes to the hypervisor package's errors,
// keeping libvirt's message.
func translate(err error) error {
	var lerr golibvirt.Error
	if !errors.As(err, &lerr) {
		return err
	}
	switch lerr.Code {
	case golibvirt.ERR_NO_DOMAIN:
		return &wrapped{lerr.Message, hypervisor.ErrNotFound}
	case golibvirt.ERR_OPERATION_INVALID:
		return &wrapped{lerr.Message, hypervisor.ErrInvalidState}
	case golibvirt.ERR_AGENT_UNRESPONSIVE, golibvirt.ERR_AGENT_UNSYNCED, golibvirt.ERR_AGENT_COMMAND_TIMEOUT:
		return &wrapped{lerr.Message, hypervisor.ErrAgentUnavailable}
	}
	return err
}

// wrapped is libvirt's message, matching a hypervisor error with errors.Is.
type wrapped struct {
	msg    string
	target error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.target }

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

// SetVCPUs implements hypervisor.Hypervisor.
func (h *Hypervisor) SetVCPUs(ctx context.Context, name string, count uint) error {
	return h.onDomain(ctx, "set vCPUs of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "set vCPUs of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		max, err := d.GetVcpusFlags(golibvirt.DOMAIN_VCPU_LIVE | golibvirt.DOMAIN_VCPU_MAXIMUM)
		if err != nil {
			return err
		}
		if count == 0 || count > uint(max) {
			return fmt.Errorf("%d vCPUs: the domain has 1 to %d", count, max)
		}
		return d.SetVcpusFlags(count, golibvirt.DOMAIN_VCPU_LIVE)
	})
}

// AttachDisk implements hypervisor.Hypervisor.
func (h *Hypervisor) AttachDisk(ctx context.Context, name, diskXML string) error {
	return h.onDomain(ctx, "attach a disk to", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "attach a disk to", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.AttachDeviceFlags(diskXML, golibvirt.DOMAIN_DEVICE_MODIFY_LIVE|golibvirt.DOMAIN_DEVICE_MODIFY_CONFIG)
	})
}

// DetachDisk implements hypervisor.Hypervisor.
func (h *Hypervisor) DetachDisk(ctx context.Context, name, alias string) error {
	return h.onDomain(ctx, "detach a disk from", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "detach a disk from", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.DetachDeviceAlias(alias, golibvirt.DOMAIN_DEVICE_MODIFY_LIVE|golibvirt.DOMAIN_DEVICE_MODIFY_CONFIG)
	})
}

// MemoryDump implements hypervisor.Hypervisor.
func (h *Hypervisor) MemoryDump(ctx context.Context, name, path string) error {
	return h.onDomain(ctx, "dump the memory of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "dump the memory of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.CoreDumpWithFormat(path, golibvirt.DOMAIN_CORE_DUMP_FORMAT_RAW, golibvirt.DUMP_MEMORY_ONLY)
	})
}

// DiskCapacity implements hypervisor.Hypervisor (virDomainGetBlockInfo).
func (h *Hypervisor) DiskCapacity(ctx context.Context, name, target string) (uint64, error) {
	var out uint64
	err := h.onDomain(ctx, "read the disk capacity of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "read the disk capacity of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		info, err := d.GetBlockInfo(target, 0)
		if err != nil {
			return err
		}
		out = info.Capacity
		return nil
	})
	return out, err
}

// ResizeDisk implements hypervisor.Hypervisor (virDomainBlockResize, in
// bytes).
func (h *Hypervisor) ResizeDisk(ctx context.Context, name, target string, size uint64) error {
	return h.onDomain(ctx, "resize a disk of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "resize a disk of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		return d.BlockResize(target, size, golibvirt.DOMAIN_BLOCK_RESIZE_BYTES)
	})
}

// Disks implements hypervisor.Hypervisor.
func (h *Hypervisor) Disks(ctx context.Context, name string) ([]libvirtxml.DomainDisk, error) {
	var out []libvirtxml.DomainDisk
	err := h.onDomain(ctx, "list the disks of", name, func(d *golibvirt.Domain) error {
		desc, err := d.GetXMLDesc(0)
		if err != nil {
			return err
		}
		var dom libvirtxml.Domain
		if err := dom.Unmarshal(desc); err != nil {
			return err
		}
		if dom.Devices != nil {
			out = dom.Devices.Disks
		}
		return nil
	})
	return out, err
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

// statsTypes are the groups of statistics Stats asks libvirt for.
const statsTypes = golibvirt.DOMAIN_STATS_CPU_TOTAL | golibvirt.DOMAIN_STATS_BALLOON | golibvirt.DOMAIN_STATS_VCPU |
	golibvirt.DOMAIN_STATS_INTERFACE | golibvirt.DOMAIN_STATS_BLOCK

// Stats implements hypervisor.Hypervisor with virDomainListGetStats (the
// per-domain form of virConnectGetAllDomainStats, which KubeVirt's
// launcher calls) and the live domain XML, which names the VMI's disk and
// interface of each device by its user alias.
func (h *Hypervisor) Stats(ctx context.Context, name string) (hypervisor.DomainStats, error) {
	var out hypervisor.DomainStats
	err := h.call(ctx, "stats", name, func(c *golibvirt.Connect) error {
		dom, err := c.LookupDomainByName(name)
		if err != nil {
			return err
		}
		defer dom.Free()
		if err := requireState(dom, "read the statistics of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED,
			golibvirt.DOMAIN_PAUSED, golibvirt.DOMAIN_SHUTDOWN, golibvirt.DOMAIN_PMSUSPENDED); err != nil {
			return err
		}
		all, err := c.GetAllDomainStats([]*golibvirt.Domain{dom}, statsTypes, 0)
		if err != nil {
			return err
		}
		defer func() {
			for i := range all {
				_ = all[i].Domain.Free()
			}
		}()
		if len(all) != 1 {
			return fmt.Errorf("libvirt returned the statistics of %d domains, want 1", len(all))
		}
		aliases := map[string]string{}
		if desc, err := dom.GetXMLDesc(0); err == nil {
			aliases = deviceAliases(desc)
		}
		out = convertStats(&all[0], aliases)
		return nil
	})
	return out, err
}

// deviceAliases maps the disks' target devices ("disk/vda") and the
// interfaces' host devices ("net/tap0") of a live domain XML to the names
// the VMI gave them (their user aliases).
func deviceAliases(desc string) map[string]string {
	out := map[string]string{}
	var d libvirtxml.Domain
	if err := d.Unmarshal(desc); err != nil || d.Devices == nil {
		return out
	}
	for _, disk := range d.Devices.Disks {
		if disk.Target != nil && disk.Alias != nil {
			out["disk/"+disk.Target.Dev] = hypervisor.DeviceName(disk.Alias.Name)
		}
	}
	for _, iface := range d.Devices.Interfaces {
		if iface.Target != nil && iface.Alias != nil {
			out["net/"+iface.Target.Dev] = hypervisor.DeviceName(iface.Alias.Name)
		}
	}
	return out
}

// convertStats converts libvirt's statistics record: balloon sizes from
// KiB to bytes, values libvirt did not set left nil.
func convertStats(st *golibvirt.DomainStats, aliases map[string]string) hypervisor.DomainStats {
	var out hypervisor.DomainStats
	if c := st.Cpu; c != nil {
		out.CPU = hypervisor.CPUStats{TimeNs: opt(c.TimeSet, c.Time), UserNs: opt(c.UserSet, c.User), SystemNs: opt(c.SystemSet, c.System)}
	}
	if b := st.Balloon; b != nil {
		kib := func(set bool, v uint64) *uint64 { return opt(set, v*1024) }
		out.Memory = hypervisor.MemoryStats{
			DomainBytes:        kib(b.MaximumSet, b.Maximum),
			ActualBalloonBytes: kib(b.CurrentSet, b.Current),
			ResidentBytes:      kib(b.RssSet, b.Rss),
			AvailableBytes:     kib(b.AvailableSet, b.Available),
			UsableBytes:        kib(b.UsableSet, b.Usable),
			UnusedBytes:        kib(b.UnusedSet, b.Unused),
			CachedBytes:        kib(b.DiskCachesSet, b.DiskCaches),
			SwapInBytes:        kib(b.SwapInSet, b.SwapIn),
			SwapOutBytes:       kib(b.SwapOutSet, b.SwapOut),
			MajorFaults:        opt(b.MajorFaultSet, b.MajorFault),
			MinorFaults:        opt(b.MinorFaultSet, b.MinorFault),
		}
	}
	for i, v := range st.Vcpu {
		state := hypervisor.VCPUUnknown
		if v.StateSet {
			switch v.State {
			case golibvirt.VCPU_OFFLINE:
				state = hypervisor.VCPUOffline
			case golibvirt.VCPU_RUNNING:
				state = hypervisor.VCPURunning
			case golibvirt.VCPU_BLOCKED:
				state = hypervisor.VCPUBlocked
			}
		}
		out.VCPUs = append(out.VCPUs, hypervisor.VCPUStats{ID: i, State: state,
			TimeNs: opt(v.TimeSet, v.Time), WaitNs: opt(v.WaitSet, v.Wait), DelayNs: opt(v.DelaySet, v.Delay)})
	}
	for _, n := range st.Net {
		if !n.NameSet {
			continue
		}
		out.Interfaces = append(out.Interfaces, hypervisor.InterfaceStats{
			Name: n.Name, Alias: aliases["net/"+n.Name],
			RxBytes: opt(n.RxBytesSet, n.RxBytes), RxPackets: opt(n.RxPktsSet, n.RxPkts),
			RxErrors: opt(n.RxErrsSet, n.RxErrs), RxDrops: opt(n.RxDropSet, n.RxDrop),
			TxBytes: opt(n.TxBytesSet, n.TxBytes), TxPackets: opt(n.TxPktsSet, n.TxPkts),
			TxErrors: opt(n.TxErrsSet, n.TxErrs), TxDrops: opt(n.TxDropSet, n.TxDrop),
		})
	}
	for _, b := range st.Block {
		// One record per disk: backing images would come as further
		// records only with the flag STATS_BACKING, which Stats does not
		// pass.
		if !b.NameSet {
			continue
		}
		out.Disks = append(out.Disks, hypervisor.DiskStats{
			Name: b.Name, Alias: aliases["disk/"+b.Name],
			ReadRequests: opt(b.RdReqsSet, b.RdReqs), ReadBytes: opt(b.RdBytesSet, b.RdBytes), ReadTimeNs: opt(b.RdTimesSet, b.RdTimes),
			WriteRequests: opt(b.WrReqsSet, b.WrReqs), WriteBytes: opt(b.WrBytesSet, b.WrBytes), WriteTimeNs: opt(b.WrTimesSet, b.WrTimes),
			FlushRequests: opt(b.FlReqsSet, b.FlReqs), FlushTimeNs: opt(b.FlTimesSet, b.FlTimes),
		})
	}
	return out
}

// opt is v when libvirt set it, else nil.
func opt(set bool, v uint64) *uint64 {
	if !set {
		return nil
	}
	return &v
}

// requireState fails with hypervisor.ErrInvalidState unless the domain is
// in one of the allowed states. libvirt checks too, but its drivers report
// the same condition with different error codes.
func requireState(d *golibvirt.Domain, op string, allowed ...golibvirt.DomainState) error {
	st, reason, err := d.GetState()
	if err != nil {
		return err
	}
	for _, a := range allowed {
		if st == a {
			return nil
		}
	}
	return &wrapped{fmt.Sprintf("cannot %s a domain that is %s", op, domainState(st, reason)), hypervisor.ErrInvalidState}
}

// GuestAgentCommand implements hypervisor.Hypervisor with libvirt's
// virDomainQemuAgentCommand, through the domain's org.qemu.guest_agent.0
// channel. libvirt waits for the agent's reply up to the context's deadline
// (whole seconds, at least one) or, without one, the call timeout.
func (h *Hypervisor) GuestAgentCommand(ctx context.Context, name, command string) (string, error) {
	wait := h.timeout
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	secs := int(wait / time.Second)
	if secs < 1 {
		secs = 1
	}
	var out string
	err := h.onDomain(ctx, "guest agent command on", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "talk to the guest agent of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED); err != nil {
			return err
		}
		var err error
		out, err = d.QemuAgentCommand(command, golibvirt.DomainQemuAgentCommandTimeout(secs), 0)
		return err
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

// KVMSupported implements hypervisor.Hypervisor with libvirt's domain
// capabilities for virt type "kvm": libvirt answers them only when /dev/kvm
// is usable and the architecture's QEMU can use it, and refuses (an
// unsupported configuration or an architecture without an emulator)
// otherwise.
func (h *Hypervisor) KVMSupported(ctx context.Context, arch string) (bool, error) {
	supported := false
	err := h.call(ctx, "domain capabilities of", "kvm/"+arch, func(c *golibvirt.Connect) error {
		_, err := c.GetDomainCapabilities("", arch, "", "kvm", 0)
		var lerr golibvirt.Error
		switch {
		case err == nil:
			supported = true
		case errors.As(err, &lerr) && (lerr.Code == golibvirt.ERR_CONFIG_UNSUPPORTED || lerr.Code == golibvirt.ERR_INVALID_ARG ||
			lerr.Code == golibvirt.ERR_NO_SUPPORT || lerr.Code == golibvirt.ERR_OPERATION_UNSUPPORTED):
			return nil
		default:
			return err
		}
		return nil
	})
	return supported, err
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

// Console implements hypervisor.Hypervisor. It opens the console through
// libvirt, which works for pty consoles. libvirt 9 cannot open a console
// whose serial port is a UNIX socket (domainxml's default); then Console
// connects to the socket itself, which works wherever the socket is
// reachable: on the node, or in the launcher pod.
func (h *Hypervisor) Console(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	var (
		out        io.ReadWriteCloser
		socketPath string
	)
	err := h.call(ctx, "console", name, func(c *golibvirt.Connect) error {
		dom, err := c.LookupDomainByName(name)
		if err != nil {
			return err
		}
		defer dom.Free()
		if socketPath, err = serialSocket(dom); err != nil || socketPath != "" {
			return err
		}
		stream, err := c.NewStream(0)
		if err != nil {
			return err
		}
		if err := dom.OpenConsole("", stream, golibvirt.DOMAIN_CONSOLE_FORCE); err != nil {
			_ = stream.Free()
			return err
		}
		out = &console{stream: stream}
		return nil
	})
	if err != nil || out != nil {
		return out, err
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", name, err)
	}
	return conn, nil
}

// serialSocket returns the path of the UNIX socket QEMU listens on for the
// running domain's first serial port, or "" when it is not a listening
// UNIX socket.
func serialSocket(dom *golibvirt.Domain) (string, error) {
	desc, err := dom.GetXMLDesc(0)
	if err != nil {
		return "", err
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(desc); err != nil {
		return "", err
	}
	if d.Devices == nil || len(d.Devices.Serials) == 0 {
		return "", nil
	}
	src := d.Devices.Serials[0].Source
	if src == nil || src.UNIX == nil || src.UNIX.Mode != "bind" {
		return "", nil
	}
	return src.UNIX.Path, nil
}

// console is a libvirt console stream. Reads and writes hold mu shared;
// Close aborts the stream, which ends a Read blocked in another goroutine,
// then takes mu exclusively so the stream is freed only once no call uses it.
type console struct {
	stream *golibvirt.Stream
	mu     sync.RWMutex
	closed bool
	once   sync.Once
	err    error
}

func (c *console) Read(p []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.stream.Recv(p)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	written := 0
	for written < len(p) {
		n, err := c.stream.Send(p[written:])
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

func (c *console) Close() error {
	c.once.Do(func() {
		c.err = c.stream.Abort()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closed = true
		_ = c.stream.Free()
	})
	return c.err
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
