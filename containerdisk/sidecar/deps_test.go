package sidecar

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly: the package imports the standard library only,
// so the static container-disk binary, copied into every container disk's
// container, stays small and free of cgo.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range lines {
		path, standard, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("unexpected go list line %q", line)
		}
		if standard != "true" && path != "github.com/vmkit/vmkit/containerdisk/sidecar" {
			t.Errorf("sidecar imports %s: it must use the standard library only", path)
		}
	}
	if len(lines) < 10 {
		t.Fatalf("go list returned only %d packages; the check is not looking at sidecar", len(lines))
	}
}
