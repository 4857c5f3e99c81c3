package vmctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vmkit/vmkit/vmctl/internal/portforward"
)

// vncViewers are the viewers vnc starts, first found on the PATH wins,
// with the arguments that connect each to host:port.
var vncViewers = []struct {
	name string
	args func(addr string) []string
}{
	{"remote-viewer", func(addr string) []string { return []string{"vnc://" + addr} }},
	{"vncviewer", func(addr string) []string { return []string{addr} }},
}

func (c *cli) vncCommand() *cobra.Command {
	var proxyOnly, web bool
	var port int
	var address string
	cmd := &cobra.Command{
		Use:   "vnc (VMI)",
		Short: "Open a vnc connection to a virtual machine instance.",
		Long: `Serves the VNC display of a virtual machine instance on a local port and starts a VNC viewer
(remote-viewer or vncviewer) on it. With --proxy-only no viewer is started: the port is printed as
JSON ({"port":N}) and every connection to it gets its own VNC stream, until interrupted.

With --web the display opens in virt-api's web console, in a browser, instead: a local proxy to
the API server with your kubeconfig credentials (what "kubectl proxy" serves) listens on --address
and --port, the page's URL is printed and opened with $BROWSER (else xdg-open), and the proxy
serves until interrupted. The name _ opens the page with the namespace's VM list only.`,
		Example: c.example("  # Connect to 'myvmi' with remote-viewer or vncviewer:\n  %[1]s vnc myvmi\n\n" +
			"  # Only serve it on a local port, for a viewer of your choice:\n  %[1]s vnc myvmi --proxy-only --port=5900\n\n" +
			"  # Open the display of 'myvmi' in the web console, in a browser:\n  %[1]s vnc myvmi --web"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVMI, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if web && proxyOnly {
				return errors.New("--web and --proxy-only exclude each other: --web serves the web console through a local API proxy, --proxy-only the VNC display to local viewers")
			}
			name := args[0]
			ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if web {
				ns, err := c.namespace()
				if err != nil {
					return err
				}
				return c.serveWebConsole(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(),
					webConsole{namespace: ns, name: name, view: "vnc", address: address, port: port})
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("can't listen on %s:%d: %w", address, port, err)
			}
			defer func() { _ = ln.Close() }()
			go func() {
				<-ctx.Done()
				_ = ln.Close()
			}()
			open := func(ctx context.Context) (net.Conn, error) {
				return s.Stream(ctx, ns, name, "vnc")
			}
			// Check the VMI's display is reachable before anyone connects,
			// so errors show at once; the connection serves the first client.
			first, err := open(ctx)
			if err != nil {
				return fmt.Errorf("can't access VMI %s: %w", name, err)
			}
			actual := ln.Addr().(*net.TCPAddr).Port
			served := make(chan error, 1)
			logf := func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			go func() { served <- serveProxy(ctx, ln, first, open, logf) }()

			if proxyOnly {
				data, err := json.Marshal(struct {
					Port int `json:"port"`
				}{actual})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
				return portforward.IgnoreClosed(ctx, <-served)
			}
			viewer, err := vncViewer(net.JoinHostPort(address, strconv.Itoa(actual)))
			if err != nil {
				return err
			}
			viewer.Stdout, viewer.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			done := make(chan error, 1)
			go func() { done <- c.opts.RunCommand(viewer) }()
			select {
			case err := <-done:
				if err != nil {
					return fmt.Errorf("%s: %w", viewer.Path, err)
				}
				return nil
			case err := <-served:
				return portforward.IgnoreClosed(ctx, err)
			}
		},
	}
	cmd.Flags().BoolVar(&proxyOnly, "proxy-only", false, "Only run the proxy and print the local port VNC viewers can connect to, as JSON.")
	cmd.Flags().BoolVar(&web, "web", false, "Open the display in virt-api's web console, in a browser, through a local API proxy.")
	cmd.Flags().IntVar(&port, "port", 0, "The local port to listen on (with --web, the API proxy's); a free port when 0.")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "The local address to listen on (with --web, the API proxy's).")
	return cmd
}

// vncViewer is the command that shows addr in the first viewer on the PATH.
func vncViewer(addr string) (*exec.Cmd, error) {
	for _, v := range vncViewers {
		if path, err := exec.LookPath(v.name); err == nil {
			return exec.Command(path, v.args(addr)...), nil
		}
	}
	return nil, errors.New("could not find remote-viewer or vncviewer on the PATH; use --proxy-only and a viewer of your choice")
}

// serveProxy accepts connections on ln until it is closed, joining each to
// a new remote stream (the first to first, when not nil).
func serveProxy(ctx context.Context, ln net.Listener, first net.Conn, open func(context.Context) (net.Conn, error), logf func(string, ...any)) error {
	defer func() {
		if first != nil {
			_ = first.Close()
		}
	}()
	for {
		local, err := ln.Accept()
		if err != nil {
			return err
		}
		remote := first
		first = nil
		go func() {
			if remote == nil {
				var err error
				if remote, err = open(ctx); err != nil {
					logf("error opening a VNC stream for %s: %v", local.RemoteAddr(), err)
					_ = local.Close()
					return
				}
			}
			portforward.Join(local, remote)
		}()
	}
}
