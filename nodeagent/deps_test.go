package nodeagent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCgoDependencies guards the design rule that the node agent and the
// launcher package are importable without cgo: the hypervisor (libvirt)
// is wired in by cmd/virt-launcher only.
func TestNoCgoDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", ".", "./launcher").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("unexpected go list output %q", line)
		}
		if strings.HasPrefix(f[0], "libvirt.org/go/libvirt") && f[0] != "libvirt.org/go/libvirtxml" {
			t.Errorf("nodeagent depends on %s", f[0])
		}
		if f[1] == "false" && f[2] != "0" {
			t.Errorf("nodeagent depends on %s, which uses cgo", f[0])
		}
	}
}
