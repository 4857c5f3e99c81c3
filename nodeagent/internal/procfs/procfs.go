// Package procfs reads what the node agent needs to know of a launcher
// process from /proc/<pid>: the user and group it runs as, and its limit
// of open files. The agent sees launchers' processes through the host's
// PID namespace (virt-handler's hostPID).
package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// User is the user and group the process pid runs as (a launcher pod's
// runAsUser and runAsGroup), from /proc/<pid>/status.
func User(pid int) (uid, gid int, err error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "status")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	uid, gid = -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "Uid:" && f[0] != "Gid:") {
			continue
		}
		n, err := strconv.Atoi(f[1]) // the real ID
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		if f[0] == "Uid:" {
			uid = n
		} else {
			gid = n
		}
	}
	if uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("%s: no Uid or Gid line", path)
	}
	return uid, gid, nil
}

// OpenFileLimit is the hard limit of open files of the process pid (from
// /proc/<pid>/limits); 0 when unlimited.
func OpenFileLimit(pid int) (uint64, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "limits")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest) // soft, hard, unit
		if len(f) < 2 {
			break
		}
		if f[1] == "unlimited" {
			return 0, nil
		}
		return strconv.ParseUint(f[1], 10, 64)
	}
	return 0, fmt.Errorf("%s has no line Max open files", path)
}
