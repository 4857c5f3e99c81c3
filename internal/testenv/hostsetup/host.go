package hostsetup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// KubeletRootDir is the kubelet's directory on the host, which the first
// node owns while it runs.
const KubeletRootDir = "/var/lib/kubelet"

const (
	nodeLockFile = "/run/vmkit-node.lock"
	// nodeLockWait bounds how long a test waits for another test's node.
	nodeLockWait = 15 * time.Minute
	cgroupRoot   = "/sys/fs/cgroup"
)

// LockNode takes the machine-wide node lock, or names who holds it; the
// holder's description names runDir. Only one vmkit node runs on a machine
// (the kubelet's paths and ports are fixed).
func LockNode(runDir string) (*os.File, error) {
	f, err := os.OpenFile(nodeLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	// Test binaries of different packages (go test runs them in parallel)
	// take turns; anything else holding the lock (the demo's cluster) is
	// reported at once.
	deadline := time.Now().Add(nodeLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		holder, _ := os.ReadFile(nodeLockFile)
		if !strings.Contains(string(holder), ".test,") || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another vmkit node runs on this machine (%s); only one can (the kubelet's paths and ports are fixed): stop it first (`make demo-down` for the demo's)",
				strings.TrimSpace(string(holder)))
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%s, pid %d, run dir %s\n", filepath.Base(os.Args[0]), os.Getpid(), runDir)), 0)
	return f, nil
}

// RootIsShared reports whether / is a shared mount (has a shared: tag in
// /proc/self/mountinfo).
func RootIsShared() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 6 && fields[4] == "/" {
			for _, f := range fields[6:] {
				if f == "-" {
					break
				}
				if strings.HasPrefix(f, "shared:") {
					return true
				}
			}
		}
	}
	return false
}

// MakeRootShared makes / and every mount below it shared (pods may mount
// host paths with Bidirectional propagation only from shared mounts).
func MakeRootShared() error {
	if err := syscall.Mount("", "/", "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("making / a shared mount: %w", err)
	}
	return nil
}

// MakeRootPrivate undoes MakeRootShared: every mount was private before
// (testenv only makes / shared when it was not).
func MakeRootPrivate() error {
	if err := syscall.Mount("", "/", "", syscall.MS_PRIVATE|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("making / private again: %w", err)
	}
	return nil
}
