// Package portforward joins local connections to streams of a VMI's
// ports: each accepted TCP connection and each UDP client address gets its
// own stream, or standard input and output are joined to one (ssh's
// ProxyCommand).
package portforward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/vmkit/vmkit/vmctl/internal/stream"
)

// udpIdleTimeout closes the stream of a local UDP client after this long
// without a datagram either way.
const udpIdleTimeout = 2 * time.Minute

// Port is one forwarded port.
type Port struct {
	// Local is the local port; 0 picks a free one.
	Local int
	// Remote is the guest's port.
	Remote int
	// Protocol is "tcp" or "udp".
	Protocol string
}

// Forwarder opens streams to one VMI's ports.
type Forwarder struct {
	// Open opens a stream to the guest's port p.Remote (p.Protocol).
	Open func(ctx context.Context, p Port) (net.Conn, error)
	// ErrOut receives a line for each connection or datagram that could
	// not be forwarded.
	ErrOut io.Writer

	mu sync.Mutex // serializes writes to ErrOut
}

func (f *Forwarder) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.ErrOut, format+"\n", args...)
}

// Stdio joins in and out to one stream until either side ends.
func (f *Forwarder) Stdio(ctx context.Context, in io.Reader, out io.Writer, p Port) error {
	conn, err := f.Open(ctx, p)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, in)
		done <- err
	}()
	go func() {
		_, err := io.Copy(out, conn)
		done <- err
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-done:
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return err
	}
}

// Listen forwards every port, listening on address, until ctx ends or a
// listener fails; it tells out where each listens.
func (f *Forwarder) Listen(ctx context.Context, address string, ports []Port, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	errs := make(chan error, len(ports))
	for _, p := range ports {
		addr := net.JoinHostPort(address, strconv.Itoa(p.Local))
		if p.Protocol == "udp" {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("can't listen on udp %s: %w", addr, err)
			}
			closers = append(closers, pc)
			fmt.Fprintf(out, "Forwarding from %s -> %d/udp\n", pc.LocalAddr(), p.Remote)
			go func() { errs <- f.serveUDP(ctx, pc, p) }()
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("can't listen on %s: %w", addr, err)
		}
		closers = append(closers, ln)
		fmt.Fprintf(out, "Forwarding from %s -> %d\n", ln.Addr(), p.Remote)
		go func() { errs <- f.serveTCP(ctx, ln, p) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// serveTCP joins every accepted connection to a new stream.
func (f *Forwarder) serveTCP(ctx context.Context, ln net.Listener, p Port) error {
	for {
		local, err := ln.Accept()
		if err != nil {
			return IgnoreClosed(ctx, err)
		}
		go func() {
			remote, err := f.Open(ctx, p)
			if err != nil {
				f.logf("error forwarding a connection to port %d: %v", p.Remote, err)
				_ = local.Close()
				return
			}
			Join(local, remote)
		}()
	}
}

// serveUDP gives every local client address its own stream; each datagram
// is one WebSocket message either way. A client's stream closes after
// udpIdleTimeout without traffic.
func (f *Forwarder) serveUDP(ctx context.Context, pc net.PacketConn, p Port) error {
	var mu sync.Mutex
	clients := map[string]net.Conn{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	buf := make([]byte, 65536)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return IgnoreClosed(ctx, err)
		}
		key := addr.String()
		mu.Lock()
		remote := clients[key]
		mu.Unlock()
		if remote == nil {
			if remote, err = f.Open(ctx, p); err != nil {
				f.logf("error forwarding datagrams from %s to port %d/udp: %v", key, p.Remote, err)
				continue
			}
			mu.Lock()
			clients[key] = remote
			mu.Unlock()
			go func() {
				defer func() {
					mu.Lock()
					delete(clients, key)
					mu.Unlock()
					_ = remote.Close()
				}()
				for {
					_ = remote.SetReadDeadline(time.Now().Add(udpIdleTimeout))
					msg, err := stream.ReadMessage(remote)
					if err != nil {
						return
					}
					if _, err := pc.WriteTo(msg, addr); err != nil {
						return
					}
				}
			}()
		}
		_ = remote.SetReadDeadline(time.Now().Add(udpIdleTimeout))
		if _, err := remote.Write(buf[:n]); err != nil {
			f.logf("error forwarding a datagram from %s to port %d/udp: %v", key, p.Remote, err)
		}
	}
}

// Join copies between two connections until either side ends, then closes
// both.
func Join(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(a, b)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(b, a)
		done <- struct{}{}
	}()
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

// IgnoreClosed hides the listener's "use of closed network connection"
// once ctx ended: the user interrupted a proxy.
func IgnoreClosed(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
