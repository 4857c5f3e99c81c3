package hostsetup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CreateCgroup creates the cgroup name below the root of every cgroup v1
// hierarchy (or the v2 one) for a kubelet's cgroup root; in the cpuset
// hierarchy it gets its parent's CPUs and memory nodes, without which no
// process can join it.
func CreateCgroup(name string) error {
	hierarchies := []string{cgroupRoot}
	if !Exists(filepath.Join(cgroupRoot, "cgroup.controllers")) {
		hierarchies, _ = filepath.Glob(filepath.Join(cgroupRoot, "*"))
	}
	for _, h := range hierarchies {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			continue
		}
		d := filepath.Join(h, name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
				return fmt.Errorf("creating cgroup %s: %s: %w", d, f, err)
			}
		}
	}
	return nil
}

// KillCgroup SIGKILLs every process in the named cgroup, and below it, of
// every cgroup v1 hierarchy (or the v2 one).
func KillCgroup(name string) error {
	dirs := CgroupDirs(name)
	for range 50 {
		found := false
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(path string, entry os.DirEntry, err error) error {
				if err != nil || entry.IsDir() || entry.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						found = true
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if !found {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes are left in the %s cgroups after SIGKILL", name)
}

// CgroupDirs are the directories of the named cgroup in every cgroup v1
// hierarchy, or in the v2 one.
func CgroupDirs(name string) []string {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", name))
	if d := filepath.Join(cgroupRoot, name); Exists(d) {
		dirs = append(dirs, d)
	}
	return dirs
}

// RemoveCgroup removes the (empty) cgroup directories below and of name.
func RemoveCgroup(name string) error {
	dirs := CgroupDirs(name)
	var errs []error
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(path string, entry os.DirEntry, err error) error {
			if err == nil && entry.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- { // children first
			if err := syscall.Rmdir(all[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", all[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
