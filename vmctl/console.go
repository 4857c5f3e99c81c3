package vmctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// escapeByte ends an interactive console: Ctrl+] (and Ctrl+5, which
// terminals send as the same byte), as in virtctl and telnet.
const escapeByte = 0x1d

func (c *cli) consoleCommand() *cobra.Command {
	var timeout int
	var web bool
	var address string
	var port int
	cmd := &cobra.Command{
		Use:   "console (VMI)",
		Short: "Connect to a console of a virtual machine instance.",
		Long: `Connects the terminal to the serial console of a virtual machine instance. The terminal is put
in raw mode, so keys like Ctrl+C reach the guest; Ctrl+] (or Ctrl+5) ends the session.
While the instance is not running yet, the connection is retried for --timeout minutes.

With --web the serial console opens in virt-api's web console, in a browser, instead: a local
proxy to the API server with your kubeconfig credentials (what "kubectl proxy" serves) listens on
--address and --port, the page's URL is printed and opened with $BROWSER (else xdg-open), and the
proxy serves until interrupted. The name _ opens the page with the namespace's VM list only.`,
		Example: c.example("  # Connect to the console on VirtualMachineInstance 'myvmi':\n  %[1]s console myvmi\n\n" +
			"  # Wait at most one minute for it to be ready (default 5 minutes):\n  %[1]s console --timeout=1 myvmi\n\n" +
			"  # Open the console of 'myvmi' in the web console, in a browser:\n  %[1]s console myvmi --web\n\n" +
			"  # Serve the web console of namespace 'dev' on port 8001, with its VM list only:\n  %[1]s console _ --web --port=8001 -n dev"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVMI, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !web && (cmd.Flags().Changed("address") || cmd.Flags().Changed("port")) {
				return errors.New("--address and --port are those of --web's proxy: use them with --web")
			}
			ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if web {
				ns, err := c.namespace()
				if err != nil {
					return err
				}
				return c.serveWebConsole(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(),
					webConsole{namespace: ns, name: args[0], view: "console", address: address, port: port})
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			conn, err := dialConsole(ctx, s, ns, args[0], time.Duration(timeout)*time.Minute)
			if err != nil {
				if ctx.Err() != nil && contextOf(cmd).Err() == nil {
					return nil // interrupted while waiting
				}
				return err
			}
			defer func() { _ = conn.Close() }()
			return attachConsole(ctx, conn, c.opts.Streams.In, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	cmd.Flags().IntVar(&timeout, "timeout", 5, "The number of minutes to wait for the virtual machine instance to be ready.")
	cmd.Flags().BoolVar(&web, "web", false, "Open the console in virt-api's web console, in a browser, through a local API proxy.")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "With --web, the local address the API proxy listens on.")
	cmd.Flags().IntVar(&port, "port", 0, "With --web, the local port the API proxy listens on; a free port when 0.")
	return cmd
}

// dialConsole opens the console stream, retrying every second while the
// server answers 400 Bad Request (the instance is not running yet), for at
// most timeout, as virtctl does.
func dialConsole(ctx context.Context, s *Subresources, ns, name string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := s.Stream(ctx, ns, name, "console")
		if err == nil {
			return conn, nil
		}
		if !apierrors.IsBadRequest(err) || timeout <= 0 {
			return nil, fmt.Errorf("can't access VMI %s: %w", name, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("timeout trying to connect to the virtual machine instance %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// attachConsole copies in to conn and conn to out until the console
// closes, in ends (or carries the escape byte), or ctx ends. When in is a
// terminal it is in raw mode meanwhile.
func attachConsole(ctx context.Context, conn net.Conn, in io.Reader, out, errOut io.Writer, name string) error {
	newline := "\n"
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		state, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("make raw terminal failed: %w", err)
		}
		defer func() {
			if err := term.Restore(int(f.Fd()), state); err != nil {
				fmt.Fprintf(errOut, "failed to restore terminal: %v\n", err)
			}
		}()
		newline = "\r\n"
	}
	fmt.Fprintf(errOut, "Successfully connected to %s console. Press Ctrl+] or Ctrl+5 to exit console.%s", name, newline)

	fromGuest := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		fromGuest <- err
	}()
	toGuest := make(chan error, 1)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				chunk := buf[:n]
				i := bytes.IndexByte(chunk, escapeByte)
				if i >= 0 {
					chunk = chunk[:i]
				}
				if len(chunk) > 0 {
					if _, werr := conn.Write(chunk); werr != nil {
						toGuest <- werr
						return
					}
				}
				if i >= 0 {
					toGuest <- nil
					return
				}
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				toGuest <- err
				return
			}
		}
	}()

	select {
	case <-ctx.Done():
		fmt.Fprint(errOut, newline)
		return nil
	case err := <-toGuest:
		fmt.Fprint(errOut, newline)
		return err
	case err := <-fromGuest:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			fmt.Fprint(errOut, newline+"You were disconnected from the console. This could be caused by one of the following:"+
				newline+" - the target VM was powered off"+
				newline+" - another user connected to the console of the target VM"+
				newline+" - network issues"+newline)
			return err
		}
		return nil
	}
}
