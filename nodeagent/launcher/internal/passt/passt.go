// Package passt runs passt, which connects a guest's passtBinding
// interface to the launcher pod's network: started on a socket with the
// port arguments the node agent chose, waited for until it listens, and
// watched until it exits.
package passt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// startTimeout bounds how long Start waits for passt's socket.
const startTimeout = 10 * time.Second

// Process is a passt the launcher runs for the VMI's passtBinding
// interface.
type Process struct {
	exited chan struct{} // closed when passt exits
	err    error         // why it exited, set before exited is closed
}

// Exited reports whether passt exited, and why.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	default:
		return false, nil
	}
}

// Start starts passt for interface iface on socket in the pod's network
// namespace, with the port arguments the node agent sent (args,
// NetworkInterface.Passt), and waits until it listens. It runs as this
// process's user (passt drops root to nobody by itself) until run ends;
// its exit before that is logged.
func Start(ctx, run context.Context, socket, iface string, args []string) (*Process, error) {
	bin, err := exec.LookPath("passt")
	if err != nil {
		return nil, fmt.Errorf("interface %s uses passtBinding, but the launcher image has no passt: %w", iface, err)
	}
	if slices.Contains(args, "all") {
		if err := raiseOpenFileLimit(); err != nil {
			return nil, fmt.Errorf("interface %s lists no ports, so passt forwards every port: raising the open-file limit: %w", iface, err)
		}
	}
	_ = os.Remove(socket)
	logFile := filepath.Join(filepath.Dir(socket), "passt.log")
	cmd := exec.CommandContext(run, bin, append([]string{"--foreground", "--quiet", "--socket", socket, "--log-file", logFile}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting passt for interface %s: %w", iface, err)
	}
	p := &Process{exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		p.err = fmt.Errorf("%w: %s", err, lastLine(logFile, stderr.String()))
		close(p.exited)
		if run.Err() == nil {
			klog.FromContext(ctx).Error(p.err, "passt exited: the guest has lost the pod network", "interface", iface)
		}
	}()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			klog.FromContext(ctx).Info("passt listening", "interface", iface, "socket", socket, "args", args)
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("passt for interface %s exited before it listened: %v", iface, p.err)
		case <-deadline.C:
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("passt for interface %s did not listen on %s within %v", iface, socket, startTimeout)
		case <-tick.C:
		}
	}
}

// raiseOpenFileLimit lifts the open-file limit to its hard limit, which
// passt inherits: forwarding every port takes a socket per port. The node
// agent refused the interface already if even the hard limit is too low.
func raiseOpenFileLimit() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = lim.Max
	// Setting it, even unchanged, also stops Go from restoring its
	// start-up soft limit in the processes it starts.
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// lastLine is the last line passt logged, or of what it wrote on stderr.
func lastLine(logFile, stderr string) string {
	s := stderr
	if b, err := os.ReadFile(logFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
		s = string(b)
	}
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
