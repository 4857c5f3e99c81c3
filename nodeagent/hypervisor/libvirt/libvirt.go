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
	"sync"
	"time"

	golibvirt "libvirt.org/go/libvirt"

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
