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
	"./vmapi/...", "./podtemplate/...", "./domainxml/...", "./installstrategy/...", "./vmcontrol/...", "./containerdisk/...",
	"./nodeagent", "./nodeagent/launcher", "./nodeagent/launcher/client", "./nodeagent/localnode", "./nodeagent/hypervisor", "./nodeagent/deviceplugin",
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

// slimRoots are the packages virt-controller is built from. They must not
// link client-go/kubernetes/scheme (client-go's clientset, discovery client,
// typed clients, informers and leader election all do): it registers every
// k8s.io/api group, which was over half of the controller's code and
// read-only data and most of its memory when idle (docs/performance.md).
var slimRoots = []string{"./cmd/virt-controller", "./vmcontrol", "./vmcontrol/vm", "./vmcontrol/vmi", "./vmcontrol/kubeclient"}

func TestControllerLinksOnlyTheAPIGroupsItUses(t *testing.T) {
	args := append([]string{"list", "-deps"}, slimRoots...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var groups []string
	for _, path := range strings.Fields(string(out)) {
		switch {
		case path == "k8s.io/client-go/kubernetes/scheme", strings.HasPrefix(path, "k8s.io/client-go/informers"),
			path == "k8s.io/client-go/discovery", path == "k8s.io/client-go/tools/leaderelection":
			t.Errorf("%s is reachable from %v: it links every Kubernetes API group; use vmcontrol/kubeclient", path, slimRoots)
		case strings.HasPrefix(path, "k8s.io/api/"):
			groups = append(groups, strings.TrimPrefix(path, "k8s.io/api/"))
		}
	}
	// core/v1 and coordination/v1 are used; a few more come with them
	// (autoscaling/v1 through the generated kubevirt.io client's scale
	// subresource of replica sets), and authentication/v1 and
	// authorization/v1 are /metrics' TokenReviews and SubjectAccessReviews
	// (internal/delegatedauth).
	if len(groups) == 0 || len(groups) > 8 {
		t.Errorf("the controller links %d k8s.io/api packages, want 1–8: %v", len(groups), groups)
	}
}

// TestOneLeaderElection keeps one leader election in the module: the
// Lease election of internal/leaderelect, which virt-controller and
// virt-operator both run (issue #42). client-go's tools/leaderelection
// links every k8s.io/api group (see TestControllerLinksOnlyTheAPIGroupsItUses).
func TestOneLeaderElection(t *testing.T) {
	args := []string{"list", "-deps", "-test", "./..."}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var elections bool
	for _, path := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(path, "k8s.io/client-go/tools/leaderelection"):
			t.Errorf("%s is reachable from the module: elect with internal/leaderelect, as virt-controller and virt-operator do", path)
		case path == "github.com/vmkit/vmkit/internal/leaderelect":
			elections = true
		}
	}
	if !elections {
		t.Error("internal/leaderelect is not reachable: the check is not looking at the module")
	}
}
