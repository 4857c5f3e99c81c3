package cpuset

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]uint{"": nil, "0": {0}, "0-3,8,10-11": {0, 1, 2, 3, 8, 10, 11}} {
		got, err := parseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "3-1", "1-", "1,,2"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) succeeded", bad)
		}
	}
}

// TestHostNUMANodes reads this machine's NUMA nodes: every CPU this
// process may run on is on a node, or the kernel has no NUMA directory.
func TestHostNUMANodes(t *testing.T) {
	nodes, err := HostNUMANodes()
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := Affinity()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Affinity: %v, %v", cpus, err)
	}
	if len(nodes) == 0 {
		// A kernel without NUMA: then there is no node directory.
		if dirs, _ := filepath.Glob(filepath.Join(nodeDir, "node[0-9]*")); len(dirs) > 0 {
			t.Fatalf("no NUMA node read, and the kernel has %v", dirs)
		}
		return
	}
	for _, c := range cpus {
		if _, ok := nodes[c]; !ok {
			t.Errorf("CPU %d is on no NUMA node of %v", c, nodes)
		}
	}
}
