package vmctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmkit/vmkit/vmctl/internal/stream"
)

// udpIdleTimeout closes the stream of a local UDP client after this long
// without a datagram either way.
const udpIdleTimeout = 2 * time.Minute

// Target is a VM or VMI named on the command line as kind/name,
// kind/name/namespace or (virtctl's older form) kind/name.namespace.
type Target struct {
	// Kind is "vm" or "vmi".
	Kind string
	// Name of the VM or VMI.
	Name string
	// Namespace, empty when the target did not name one.
	Namespace string
}

// ParseTarget parses a port-forward, ssh or scp target: TYPE/NAME,
// TYPE/NAME/NAMESPACE or TYPE/NAME.NAMESPACE, where TYPE is vm or vmi
// (also vms, vmis, virtualmachine(s), virtualmachineinstance(s), in any
// case).
func ParseTarget(target string) (Target, error) {
	if target == "" {
		return Target{}, errors.New("target cannot be empty")
	}
	parts := strings.Split(target, "/")
	var t Target
	switch len(parts) {
	case 1:
		return Target{}, fmt.Errorf("target %q must contain type and name separated by '/'", target)
	case 2:
		t.Name = parts[1]
		if name, ns, ok := strings.Cut(parts[1], "."); ok {
			t.Name, t.Namespace = name, ns
			if ns == "" {
				return Target{}, fmt.Errorf("target %q: namespace cannot be empty", target)
			}
		}
	case 3:
		t.Name, t.Namespace = parts[1], parts[2]
		if t.Namespace == "" {
			return Target{}, fmt.Errorf("target %q: namespace cannot be empty", target)
		}
	default:
		return Target{}, fmt.Errorf("target %q is not valid with more than two '/'", target)
	}
	kind, err := normalizeKind(parts[0])
	if err != nil {
		return Target{}, err
	}
	t.Kind = kind
	if t.Name == "" {
		return Target{}, fmt.Errorf("target %q: name cannot be empty", target)
	}
	return t, nil
}

// ForwardedPort is one port of a port-forward command line:
// [PROTOCOL/]LOCAL[:REMOTE].
type ForwardedPort struct {
	// Local is the local port; 0 picks a free one.
	Local int
	// Remote is the guest's port.
	Remote int
	// Protocol is "tcp" or "udp".
	Protocol string
}

// ParsePort parses [PROTOCOL/]LOCAL[:REMOTE]: "8080" forwards local 8080
// to the guest's 8080, "8080:80" local 8080 to 80, ":80" a free local port
// to 80, "udp/5353:53" UDP. The protocol is tcp unless given.
func ParsePort(arg string) (ForwardedPort, error) {
	p := ForwardedPort{Protocol: "tcp"}
	spec := arg
	if proto, rest, ok := strings.Cut(arg, "/"); ok {
		p.Protocol = strings.ToLower(proto)
		spec = rest
	}
	if p.Protocol != "tcp" && p.Protocol != "udp" {
		return ForwardedPort{}, fmt.Errorf("port %q: unsupported protocol %q: use tcp or udp", arg, p.Protocol)
	}
	local, remote, hasRemote := strings.Cut(spec, ":")
	if !hasRemote {
		remote = local
	}
	var err error
	if local == "" && hasRemote {
		p.Local = 0
	} else if p.Local, err = parsePortNumber(local, 0); err != nil {
		return ForwardedPort{}, fmt.Errorf("port %q: local port: %w", arg, err)
	}
	if p.Remote, err = parsePortNumber(remote, 1); err != nil {
		return ForwardedPort{}, fmt.Errorf("port %q: remote port: %w", arg, err)
	}
	return p, nil
}

func parsePortNumber(s string, min int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > 65535 {
		return 0, fmt.Errorf("%q is not a port number (%d-65535)", s, min)
	}
	return n, nil
}

func (c *cli) portForwardCommand() *cobra.Command {
	var stdio bool
	var address string
	cmd := &cobra.Command{
		Use:   "port-forward TYPE/NAME[/NAMESPACE] [PROTOCOL/]LOCALPORT[:REMOTEPORT]...",
		Short: "Forward local ports to a virtualmachine or virtualmachineinstance.",
		Long: `Forward local ports to a virtualmachine or virtualmachineinstance.

The target is TYPE/NAME[/NAMESPACE] (or TYPE/NAME.NAMESPACE); TYPE is vmi or vm (a VM's instance
has its name). A port is [PROTOCOL/]LOCALPORT[:REMOTEPORT]: PROTOCOL is tcp (default) or udp,
LOCALPORT empty or 0 picks a free port. Every local connection gets its own stream through the
Kubernetes API server (the portforward subresource, which RBAC can restrict).

With --stdio=true the one port's stream is joined to standard input and output instead, for ssh's
ProxyCommand; messages then go to standard error.`,
		Example: c.example(`  # Forward the local port 8080 to the vmi's port 8080:
  %[1]s port-forward vmi/testvmi 8080

  # Forward the local port 8080 to the vmi's port 80, and a free local port to its port 22:
  %[1]s port-forward vmi/testvmi 8080:80 :22

  # Forward the local UDP port 5353 to the vmi's port 53 in namespace mynamespace:
  %[1]s port-forward vmi/testvmi/mynamespace udp/5353:53

  # Use it as ssh's proxy:
  ssh -o 'ProxyCommand=%[1]s port-forward --stdio=true vmi/testvmi/mynamespace 22' user@testvmi`),
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			errOut := cmd.ErrOrStderr()
			out := cmd.OutOrStdout()
			if stdio {
				// Standard output carries the stream.
				out = errOut
				cmd.SetOut(errOut)
			}
			target, err := ParseTarget(args[0])
			if err != nil {
				return err
			}
			ports := make([]ForwardedPort, 0, len(args)-1)
			for _, a := range args[1:] {
				p, err := ParsePort(a)
				if err != nil {
					return err
				}
				ports = append(ports, p)
			}
			if stdio && len(ports) != 1 {
				return errors.New("only one port is supported when forwarding to stdout")
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			if target.Namespace != "" {
				ns = target.Namespace
			}
			ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			f := &forwarder{s: s, namespace: ns, target: target, errOut: errOut}
			if stdio {
				return f.stdio(ctx, c.opts.Streams.In, c.opts.Streams.Out, ports[0])
			}
			return f.listen(ctx, address, ports, out)
		},
	}
	cmd.Flags().BoolVar(&stdio, "stdio", false, "Forward the one port to standard input and output (for ssh's ProxyCommand).")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "The local address to listen on.")
	return cmd
}

// forwarder opens streams to one VMI's ports.
type forwarder struct {
	s         *Subresources
	namespace string
	target    Target
	errOut    io.Writer
	mu        sync.Mutex // serializes writes to errOut
}

func (f *forwarder) open(ctx context.Context, p ForwardedPort) (net.Conn, error) {
	conn, err := f.s.Stream(ctx, f.namespace, f.target.Name, PortForwardPath(p.Remote, p.Protocol))
	if err != nil {
		return nil, fmt.Errorf("can't access %s/%s/%s: %w", f.target.Kind, f.target.Name, f.namespace, err)
	}
	return conn, nil
}

func (f *forwarder) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.errOut, format+"\n", args...)
}

// stdio joins in and out to one stream until either side ends.
func (f *forwarder) stdio(ctx context.Context, in io.Reader, out io.Writer, p ForwardedPort) error {
	conn, err := f.open(ctx, p)
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

// listen forwards every port until ctx ends or a listener fails.
func (f *forwarder) listen(ctx context.Context, address string, ports []ForwardedPort, out io.Writer) error {
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
func (f *forwarder) serveTCP(ctx context.Context, ln net.Listener, p ForwardedPort) error {
	for {
		local, err := ln.Accept()
		if err != nil {
			return ignoreClosed(ctx, err)
		}
		go func() {
			remote, err := f.open(ctx, p)
			if err != nil {
				f.logf("error forwarding a connection to port %d: %v", p.Remote, err)
				_ = local.Close()
				return
			}
			join(local, remote)
		}()
	}
}

// serveUDP gives every local client address its own stream; each datagram
// is one WebSocket message either way. A client's stream closes after
// udpIdleTimeout without traffic.
func (f *forwarder) serveUDP(ctx context.Context, pc net.PacketConn, p ForwardedPort) error {
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
			return ignoreClosed(ctx, err)
		}
		key := addr.String()
		mu.Lock()
		remote := clients[key]
		mu.Unlock()
		if remote == nil {
			if remote, err = f.open(ctx, p); err != nil {
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
