package hostsetup

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIPv6ForwardingRestored: the pod network turns the host's IPv6
// forwarding on and puts back the value it found when it is removed, once,
// however often either runs. The test runs in a network namespace of its
// own (the switch is per namespace), so the host's and a running
// cluster's are left alone.
func TestIPv6ForwardingRestored(t *testing.T) {
	if testing.Short() {
		t.Skip("enters a network namespace")
	}
	if os.Geteuid() != 0 {
		t.Fatal("a network namespace needs root: run the tests as root (make test does)")
	}
	saved := ipv6ForwardingSaved
	ipv6ForwardingSaved = filepath.Join(t.TempDir(), "ipv6-forwarding")
	t.Cleanup(func() { ipv6ForwardingSaved = saved })
	hostValue := func() string {
		b, err := os.ReadFile(ipv6ForwardingSysctl)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	host := hostValue()
	// enabled is sent while the namespace's forwarding is on: the host's
	// must not have changed.
	enabled, checked := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		// The thread stays in its namespace and ends with the goroutine.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return err
			}
			read := func() string {
				b, err := os.ReadFile(ipv6ForwardingSysctl)
				if err != nil {
					t.Error(err)
				}
				return strings.TrimSpace(string(b))
			}
			if err := os.WriteFile(ipv6ForwardingSysctl, []byte("0"), 0o644); err != nil {
				return err
			}
			for range 2 {
				if err := enableIPv6Forwarding(); err != nil {
					return err
				}
				if got := read(); got != "1" {
					t.Errorf("forwarding %s after enabling, want 1", got)
				}
			}
			enabled <- struct{}{}
			<-checked
			if b, err := os.ReadFile(ipv6ForwardingSaved); err != nil || strings.TrimSpace(string(b)) != "0" {
				t.Errorf("saved value %q (%v), want the 0 found", b, err)
			}
			for range 2 {
				if err := restoreIPv6Forwarding(); err != nil {
					return err
				}
				if got := read(); got != "0" {
					t.Errorf("forwarding %s after restoring, want the 0 found", got)
				}
			}
			if Exists(ipv6ForwardingSaved) {
				t.Error("the saved value is still there after restoring")
			}
			// Found on: nothing to put back.
			if err := os.WriteFile(ipv6ForwardingSysctl, []byte("1"), 0o644); err != nil {
				return err
			}
			if err := enableIPv6Forwarding(); err != nil {
				return err
			}
			if err := restoreIPv6Forwarding(); err != nil {
				return err
			}
			if got := read(); got != "1" {
				t.Errorf("forwarding %s, want the 1 found left on", got)
			}
			return nil
		}()
	}()
	select {
	case <-enabled:
		if got := hostValue(); got != host {
			t.Errorf("the host's forwarding changed from %s to %s: the test left its network namespace", host, got)
		}
		close(checked)
	case err := <-errc:
		t.Fatalf("before enabling: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
