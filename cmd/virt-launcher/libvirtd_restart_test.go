package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmkit/vmkit/internal/supervisor"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// TestLibvirtdKilledComesBack kills -9 the libvirtd of a running
// non-root launcher: its supervisor restarts it, libvirt re-attaches to
// the running QEMU, and within 60 s pause and unpause work through the
// launcher's command socket with the same QEMU process; a stop then ends
// the guest cleanly.
func TestLibvirtdKilledComesBack(t *testing.T) {
	nl := startNonRootLauncher(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	nl.boot(ctx, t)
	qemu := qemuPIDs(t, nl.ns)
	if len(qemu) != 1 {
		t.Fatalf("%d QEMU processes, want 1", len(qemu))
	}
	old := nl.libvirtd(t)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	var firstErr error
	deadline := killed.Add(60 * time.Second)
	for {
		st, err := nl.c.Pause(ctx)
		if err == nil && st.State == hypervisor.StatePaused {
			break
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause still fails 60 s after libvirtd was killed: %+v, %v", st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("paused %v after libvirtd was killed (first error: %v)", time.Since(killed).Round(time.Millisecond), firstErr)
	if firstErr != nil && !strings.Contains(firstErr.Error(), "libvirt") {
		t.Errorf("an error during the outage does not name libvirt: %v", firstErr)
	}
	if st, err := nl.c.Unpause(ctx); err != nil || st.State != hypervisor.StateRunning {
		t.Fatalf("unpause after the restart: %+v, %v", st, err)
	}
	if now := nl.libvirtd(t); now == old {
		t.Errorf("libvirtd pid %d unchanged: it was not restarted", now)
	}
	if got := qemuPIDs(t, nl.ns); len(got) != 1 || got[0] != qemu[0] {
		t.Fatalf("QEMU processes %v after the restart, want the same %v", got, qemu)
	}
	// The serial console still reaches the guest: what a client types
	// comes back, echoed by the guest's tty.
	echoed := consoleEcho(ctx, t, nl.c, "vmkit-after-libvirtd-restart")
	t.Logf("the console echoed a line typed %v after libvirtd was killed", echoed.Sub(killed).Round(time.Millisecond))

	nl.shutdown(ctx, t)
	final, err := client.ReadFinal(nl.dirs["share"], nl.uid)
	if err != nil || !final.Succeeded() {
		t.Errorf("final status %+v, %v: want a clean end", final, err)
	}
	if got := qemuPIDs(t, nl.ns); len(got) != 0 {
		t.Errorf("QEMU %v still runs after the launcher ended", got)
	}
}

// TestLibvirtdCannotRestart kills -9 the libvirtd of a running non-root
// launcher after taking its runtime directory away, so every restart
// exits at once: within 60 s (+ a margin for the stop) the launcher kills
// the guest and ends with reason LibvirtUnavailable, leaving no QEMU.
func TestLibvirtdCannotRestart(t *testing.T) {
	nl := startNonRootLauncher(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	nl.boot(ctx, t)
	if n := len(qemuPIDs(t, nl.ns)); n != 1 {
		t.Fatalf("%d QEMU processes, want 1", n)
	}
	// libvirtd (as nobody) can no longer create $XDG_RUNTIME_DIR/libvirt:
	// it exits at every start. QEMU keeps its open sockets.
	run := nl.dirs["run"]
	if err := os.Rename(filepath.Join(run, "libvirt"), filepath.Join(run, "libvirt.away")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(run, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(nl.libvirtd(t), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case err := <-nl.exited:
		nl.exited <- err
		t.Logf("virt-launcher exited %v after libvirtd was killed: %v", time.Since(killed).Round(time.Millisecond), err)
	case <-time.After(launcher.DefaultHypervisorTimeout + 20*time.Second):
		t.Fatal("virt-launcher did not give up within 60 s (+20 s)")
	}
	final, err := client.ReadFinal(nl.dirs["share"], nl.uid)
	if err != nil {
		t.Fatal(err)
	}
	if final.Reason != hypervisor.ReasonLibvirtUnavailable || final.Succeeded() || !strings.Contains(final.Message, "libvirt") {
		t.Errorf("final status %+v, want reason LibvirtUnavailable naming libvirt", final)
	}
	if !strings.Contains(final.Message, "killed the guest") {
		t.Errorf("final message %q does not say the guest was killed", final.Message)
	}
	if got := qemuPIDs(t, nl.ns); len(got) != 0 {
		t.Errorf("QEMU %v still runs after the launcher gave up", got)
	}
	log, _ := os.ReadFile(nl.logPath)
	if n := strings.Count(string(log), "restarting it in"); n < 2 {
		t.Errorf("libvirtd restarted %d times, want the supervisor to keep trying", n)
	}
}

// libvirtd is the pid of the libvirtd running under the launcher's
// supervisor.
func (nl *nonRootLauncher) libvirtd(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(argv) < 3 || argv[0] != nl.bin || argv[1] != superviseFlag || filepath.Base(argv[2]) != "libvirtd" {
			continue
		}
		var sup int
		if _, err := fmt.Sscan(e.Name(), &sup); err != nil {
			continue
		}
		for _, pid := range supervisor.Children(sup) {
			if comm, _ := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "comm")); strings.TrimSpace(string(comm)) == "libvirtd" {
				return pid
			}
		}
	}
	t.Fatal("no libvirtd under the launcher's supervisor")
	return 0
}

// consoleEcho types word and a newline on the launcher's serial console
// and waits until the guest's tty echoes word back; it returns when.
func consoleEcho(ctx context.Context, t *testing.T, c *client.Client, word string) time.Time {
	t.Helper()
	console, err := c.Console(ctx, false)
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	defer console.Close()
	if _, err := io.WriteString(console, word+"\n"); err != nil {
		t.Fatalf("typing on the console: %v", err)
	}
	found := make(chan time.Time, 1)
	go func() {
		var seen strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := console.Read(buf)
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), word) {
				found <- time.Now()
				return
			}
			if err != nil {
				close(found)
				return
			}
		}
	}()
	select {
	case at, ok := <-found:
		if !ok {
			t.Fatal("the console closed before the guest echoed what was typed")
		}
		return at
	case <-time.After(30 * time.Second):
		t.Fatal("the guest did not echo what was typed on the console within 30 s")
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return time.Time{}
}
