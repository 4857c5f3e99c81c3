package launcher

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

// passtStartTimeout bounds how long the launcher waits for passt's socket.
const passtStartTimeout = 10 * time.Second

// passtProcess is the passt the launcher runs for the VMI's passtBinding
// interface.
type passtProcess struct {
	exited chan struct{} // closed when passt exits
	err    error         // why it exited, set before exited is closed
}

// startPasstLocked starts passt on socket in the pod's network namespace,
// with the port arguments the node agent sent (NetworkInterface.Passt),
// and waits until it listens. It runs as the launcher's user (passt drops
// root to nobody by itself), for as long as the launcher runs; a passt
// already running is kept.
func (l *Launcher) startPasstLocked(ctx context.Context, socket string) error {
	if l.passt != nil {
		select {
		case <-l.passt.exited:
			return fmt.Errorf("passt, which connects interface %s to the pod network, exited: %v", l.passtIface, l.passt.err)
		default:
			return nil
		}
	}
	bin, err := exec.LookPath("passt")
	if err != nil {
		return fmt.Errorf("interface %s uses passtBinding, but the launcher image has no passt: %w", l.passtIface, err)
	}
	if slices.Contains(l.passtArgs, "all") {
		if err := raiseOpenFileLimit(); err != nil {
			return fmt.Errorf("interface %s lists no ports, so passt forwards every port: raising the open-file limit: %w", l.passtIface, err)
		}
	}
	_ = os.Remove(socket)
	logFile := filepath.Join(filepath.Dir(socket), "passt.log")
	args := append([]string{"--foreground", "--quiet", "--socket", socket, "--log-file", logFile}, l.passtArgs...)
	cmd := exec.CommandContext(l.runCtx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting passt for interface %s: %w", l.passtIface, err)
	}
	p := &passtProcess{exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		p.err = fmt.Errorf("%w: %s", err, lastLine(logFile, stderr.String()))
		close(p.exited)
		if l.runCtx.Err() == nil {
			klog.FromContext(ctx).Error(p.err, "passt exited: the guest has lost the pod network", "vmi", l.key(), "interface", l.passtIface)
		}
	}()
	deadline := time.NewTimer(passtStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			l.passt = p
			klog.FromContext(ctx).Info("passt listening", "vmi", l.key(), "interface", l.passtIface, "socket", socket, "args", l.passtArgs)
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("passt for interface %s exited before it listened: %v", l.passtIface, p.err)
		case <-deadline.C:
			_ = cmd.Process.Kill()
			return fmt.Errorf("passt for interface %s did not listen on %s within %v", l.passtIface, socket, passtStartTimeout)
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
