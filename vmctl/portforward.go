package vmctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vmkit/vmkit/vmctl/internal/portforward"
)

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
			ports := make([]portforward.Port, 0, len(args)-1)
			for _, a := range args[1:] {
				p, err := ParsePort(a)
				if err != nil {
					return err
				}
				ports = append(ports, portforward.Port(p))
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
			f := &portforward.Forwarder{ErrOut: errOut, Open: func(ctx context.Context, p portforward.Port) (net.Conn, error) {
				conn, err := s.Stream(ctx, ns, target.Name, PortForwardPath(p.Remote, p.Protocol))
				if err != nil {
					return nil, fmt.Errorf("can't access %s/%s/%s: %w", target.Kind, target.Name, ns, err)
				}
				return conn, nil
			}}
			if stdio {
				return f.Stdio(ctx, c.opts.Streams.In, c.opts.Streams.Out, ports[0])
			}
			return f.Listen(ctx, address, ports, out)
		},
	}
	cmd.Flags().BoolVar(&stdio, "stdio", false, "Forward the one port to standard input and output (for ssh's ProxyCommand).")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "The local address to listen on.")
	return cmd
}
