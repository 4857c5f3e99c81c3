package network

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// TestAdvertisersFollowTheLauncher: a key's advertisements end when the
// process whose network namespace they run in goes (a migrated-away or
// stopped launcher), and when they are stopped; a key without an IPv6
// lease starts none.
func TestAdvertisersFollowTheLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("enters another process's network namespace")
	}
	if os.Geteuid() != 0 {
		t.Fatal("entering a network namespace needs root: run the tests as root (make test does)")
	}
	// The stand-in launcher: a process whose namespace path the
	// advertisements watch (its network namespace is the test's; the
	// advertisements themselves fail at once, as it has no such device).
	launcher := exec.Command("sleep", "60")
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = launcher.Process.Kill(); _ = launcher.Wait() })
	nsPath := "/proc/" + strconv.Itoa(launcher.Process.Pid) + "/ns/net"
	lease := &dhcp.Lease6{ServerInterface: "vmkit-none0", IP: net.ParseIP("fd10:0:2::2"), PrefixLen: 120}
	a := &Advertisers{WatchInterval: 20 * time.Millisecond}
	defer a.StopAll()
	log := klog.Background()

	a.Start("no-lease", nsPath, []Result{{Interface: "default"}}, log)
	if a.Running("no-lease") {
		t.Error("advertisements run for a key without an IPv6 lease")
	}
	a.Start("stopped", nsPath, []Result{{Interface: "default", Lease6: lease}}, log)
	a.Start("launcher-goes", nsPath, []Result{{Interface: "default", Lease6: lease}}, log)
	if !a.Running("stopped") || !a.Running("launcher-goes") {
		t.Fatal("the advertisements did not start")
	}
	a.Stop("stopped")
	if a.Running("stopped") {
		t.Error("stopped advertisements still run")
	}
	time.Sleep(100 * time.Millisecond)
	if !a.Running("launcher-goes") {
		t.Fatal("the advertisements ended while their launcher runs")
	}
	if err := launcher.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = launcher.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for a.Running("launcher-goes") {
		if time.Now().After(deadline) {
			t.Fatal("the advertisements still run 5 s after their launcher went")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
