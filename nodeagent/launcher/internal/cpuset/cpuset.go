// Package cpuset reads the host's CPUs as the launcher sees them: the
// CPUs this process may run on (its affinity, which the kubelet's CPU
// manager bounds through the container's cpuset) and the NUMA node of
// each host CPU.
package cpuset

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Affinity returns the host CPUs this process may run on, in
// ascending order: its CPU affinity, which the cpuset of its container's
// cgroup bounds (the kubelet's static CPU manager writes a Guaranteed
// container's exclusive CPUs there before the container starts).
func Affinity() ([]uint, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading this process's CPU affinity: %w", err)
	}
	var cpus []uint
	for i := range uint(len(set) * 64) {
		if set.IsSet(int(i)) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// nodeDir holds the host's NUMA nodes (node<N>/cpulist).
const nodeDir = "/sys/devices/system/node"

// HostNUMANodes reads the NUMA node of each host CPU from
// /sys/devices/system/node/node<N>/cpulist. A kernel without NUMA (no
// such directory) yields an empty map: every CPU on node 0.
func HostNUMANodes() (map[uint]uint, error) {
	dirs, err := filepath.Glob(filepath.Join(nodeDir, "node[0-9]*"))
	if err != nil {
		return nil, err
	}
	nodes := map[uint]uint{}
	for _, d := range dirs {
		n, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(d), "node"), 10, 32)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("reading the CPUs of host NUMA node %d: %w", n, err)
		}
		cpus, err := parseCPUList(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(d, "cpulist"), err)
		}
		for _, c := range cpus {
			nodes[c] = uint(n)
		}
	}
	return nodes, nil
}

// parseCPUList parses the kernel's CPU list format ("0-3,8,10-11"; "" is
// none).
func parseCPUList(s string) ([]uint, error) {
	var cpus []uint
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %q is not a CPU number", s, lo)
		}
		last := first
		if isRange {
			if last, err = strconv.ParseUint(hi, 10, 32); err != nil || last < first {
				return nil, fmt.Errorf("CPU list %q: %q is not a range", s, part)
			}
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, uint(c))
		}
	}
	return cpus, nil
}
