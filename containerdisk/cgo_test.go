package containerdisk

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPureGo: the package and what it imports have no cgo, so a platform
// team's controller or CLI embedding it builds with CGO_ENABLED=0 (the
// repository's deps_test.go checks the SDK packages the same way).
func TestPureGo(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var n int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("unexpected go list line %q", line)
		}
		n++
		if fields[1] != "true" && fields[2] != "0" {
			t.Errorf("%s uses cgo (%s cgo files) and is imported by containerdisk", fields[0], fields[2])
		}
		if strings.HasPrefix(fields[0], "github.com/vmkit/vmkit/") && fields[0] != "github.com/vmkit/vmkit/containerdisk" {
			t.Errorf("containerdisk imports %s: it should stand alone", fields[0])
		}
	}
	if n < 20 {
		t.Fatalf("go list returned only %d packages; the check is not looking at containerdisk", n)
	}
}
