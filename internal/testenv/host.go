package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// lockNode takes the machine-wide node lock, or names who holds it.
func lockNode(runDir string) (*os.File, error) {
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

// prepareHost creates the node's directories and makes the shared mounts.
func (n *Node) prepareHost() error {
	for _, d := range []string{filepath.Join(n.dir, "cni"), n.StorageDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if entries, err := os.ReadDir(KubeletRootDir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(KubeletRootDir, nodeMarker)); err != nil {
			return fmt.Errorf("%s exists and was not made by a vmkit node: another kubelet owns this machine", KubeletRootDir)
		}
	}
	for _, d := range append(slices.Clone(hostDirs), KubeletRootDir) {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			n.created = append(n.created, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(KubeletRootDir, nodeMarker), nil, 0o644); err != nil {
		return err
	}
	if !rootIsShared() {
		if err := os.WriteFile(filepath.Join(KubeletRootDir, rootSharedMarker), nil, 0o644); err != nil {
			return err
		}
		if err := syscall.Mount("", "/", "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("making / a shared mount: %w", err)
		}
		n.rootShared = true
	}
	return nil
}

// rootIsShared reports whether / is a shared mount (has a shared: tag in
// /proc/self/mountinfo).
func rootIsShared() bool {
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

// makeRootPrivate undoes prepareHost's shared root: every mount was
// private before (the node only makes / shared when it was not).
func makeRootPrivate() error {
	if err := syscall.Mount("", "/", "", syscall.MS_PRIVATE|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("making / private again: %w", err)
	}
	return nil
}

// unlock releases the node lock the first node holds.
func (n *Node) unlock() {
	if n.lock != nil {
		_ = n.lock.Truncate(0)
		n.lock.Close()
		n.lock = nil
	}
}
