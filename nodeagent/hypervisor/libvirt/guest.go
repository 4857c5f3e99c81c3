package libvirt

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

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
