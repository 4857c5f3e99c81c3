package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/vmkit/vmkit/internal/testenv/hostsetup"
)

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
	if !hostsetup.RootIsShared() {
		if err := os.WriteFile(filepath.Join(KubeletRootDir, rootSharedMarker), nil, 0o644); err != nil {
			return err
		}
		if err := hostsetup.MakeRootShared(); err != nil {
			return err
		}
		n.rootShared = true
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
