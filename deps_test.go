package vmkit_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// cgoFreeRoots are the packages a controller manager or a node agent
// imports; none of them may reach cgo or libvirt's C bindings, or embedding
// vmkit would need a C toolchain and libvirt's headers. Only
// nodeagent/hypervisor/libvirt and the cmd/ binaries link libvirt.
var cgoFreeRoots = []string{
	"./vmapi/...", "./podtemplate/...", "./domainxml/...", "./installstrategy/...", "./vmcontrol/...",
	"./nodeagent", "./nodeagent/launcher", "./nodeagent/localnode", "./nodeagent/hypervisor", "./nodeagent/deviceplugin",
}

func TestSDKPackagesAreCgoFree(t *testing.T) {

	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}"}, cgoFreeRoots...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var n int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("unexpected go list line %q", line)
		}
		n++
		path, standard, cgoFiles := fields[0], fields[1] == "true", fields[2]
		if strings.HasPrefix(path, "libvirt.org/go/libvirt") && path != "libvirt.org/go/libvirtxml" {
			t.Errorf("%s is reachable from %v; only nodeagent/hypervisor/libvirt and cmd/ may import it", path, cgoFreeRoots)
		}
		if !standard && cgoFiles != "0" {
			t.Errorf("%s uses cgo (%s cgo files) and is reachable from %v", path, cgoFiles, cgoFreeRoots)
		}
	}
	if n < 50 {
		t.Fatalf("go list returned only %d packages; the check is not looking at the SDK", n)
	}
}
