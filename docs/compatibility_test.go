package docs

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// unsupportedCases are the fields api-compatibility.md reports as
// unsupported: the name the document gives each (its backticked text), a
// VMI spec that sets it, and the field path vmkit reports.
var unsupportedCases = []struct {
	doc, spec, field string
}{
	{"gpus", `{"domain":{"devices":{"gpus":[{"name":"g","deviceName":"nvidia.com/GP"}]}}}`, "spec.domain.devices.gpus"},
	{"hostDevices", `{"domain":{"devices":{"hostDevices":[{"name":"h","deviceName":"intel.com/qat"}]}}}`, "spec.domain.devices.hostDevices"},
	{"sound", `{"domain":{"devices":{"sound":{"name":"s"}}}}`, "spec.domain.devices.sound"},
	{"video", `{"domain":{"devices":{"video":{"type":"vga"}}}}`, "spec.domain.devices.video"},
	{"panicDevices", `{"domain":{"devices":{"panicDevices":[{"model":"isa"}]}}}`, "spec.domain.devices.panicDevices"},
	{"filesystems", `{"domain":{"devices":{"filesystems":[{"name":"f","virtiofs":{}}]}}}`, "spec.domain.devices.filesystems"},
	{"downwardMetrics", `{"domain":{"devices":{"downwardMetrics":{}}}}`, "spec.domain.devices.downwardMetrics"},
	{"clientPassthrough", `{"domain":{"devices":{"clientPassthrough":{}}}}`, "spec.domain.devices.clientPassthrough"},
	{"autoattachVSOCK: true", `{"domain":{"devices":{"autoattachVSOCK":true}}}`, "spec.domain.devices.autoattachVSOCK"},
	{"watchdog.diag288", `{"domain":{"devices":{"watchdog":{"name":"w","diag288":{}}}}}`, "spec.domain.devices.watchdog.diag288"},
	{"blockSize", `{"domain":{"devices":{"disks":[{"name":"d","blockSize":{"matchVolume":{}}}]}}}`, "spec.domain.devices.disks[0].blockSize"},
	{"errorPolicy", `{"domain":{"devices":{"disks":[{"name":"d","errorPolicy":"stop"}]}}}`, "spec.domain.devices.disks[0].errorPolicy"},
	{"changedBlockTracking: true", `{"domain":{"devices":{"disks":[{"name":"d","changedBlockTracking":true}]}}}`, "spec.domain.devices.disks[0].changedBlockTracking"},
	{"sriov", `{"domain":{"devices":{"interfaces":[{"name":"i","sriov":{}}]}}}`, "spec.domain.devices.interfaces[0].sriov"},
	{"slirp", `{"domain":{"devices":{"interfaces":[{"name":"i","slirp":{}}]}}}`, "spec.domain.devices.interfaces[0].slirp"},
	{"macvtap", `{"domain":{"devices":{"interfaces":[{"name":"i","macvtap":{}}]}}}`, "spec.domain.devices.interfaces[0].macvtap"},
	{"passt", `{"domain":{"devices":{"interfaces":[{"name":"i","passt":{}}]}}}`, "spec.domain.devices.interfaces[0].passt"},
	{"binding", `{"domain":{"devices":{"interfaces":[{"name":"i","binding":{"name":"plugin"}}]}}}`, "spec.domain.devices.interfaces[0].binding"},
	{"state: absent", `{"domain":{"devices":{"interfaces":[{"name":"i","bridge":{},"state":"absent"}]}}}`, "spec.domain.devices.interfaces[0].state"},
	{"launchSecurity", `{"domain":{"launchSecurity":{"sev":{}}}}`, "spec.domain.launchSecurity"},
	{"cpu.realtime", `{"domain":{"cpu":{"realtime":{}}}}`, "spec.domain.cpu.realtime"},
	{"chassis", `{"domain":{"chassis":{"serial":"s"}}}`, "spec.domain.chassis"},
	{"firmware.acpi", `{"domain":{"firmware":{"acpi":{}}}}`, "spec.domain.firmware.acpi"},
	{"memory.reservedOverhead", `{"domain":{"memory":{"reservedOverhead":{"addedOverhead":"1Mi"}}}}`, "spec.domain.memory.reservedOverhead"},
	{"rebootPolicy: Terminate", `{"domain":{"rebootPolicy":"Terminate"}}`, "spec.domain.rebootPolicy"},
	{"resourceClaims", `{"resourceClaims":[{"name":"r"}]}`, "spec.resourceClaims"},
	{"utilityVolumes", `{"utilityVolumes":[{"name":"u"}]}`, "spec.utilityVolumes"},
	{"volumes downwardMetrics", `{"volumes":[{"name":"v","downwardMetrics":{}}]}`, "spec.volumes[0].downwardMetrics"},
	{"containerPath", `{"volumes":[{"name":"v","containerPath":{"path":"/p"}}]}`, "spec.volumes[0].containerPath"},
}

// notFields are the backticked words of the list that name no field.
var notFields = []string{"Synchronized=False", "Unsupported", "virtiofsd", "apt-cache search virtiofs", "passtBinding"}

// unsupportedList returns the backticked names of the document's
// "Reported as unsupported" list, with "volumes " before a name that
// follows the word volumes in its item (downwardMetrics is both a device
// and a volume source).
func unsupportedList(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("api-compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "- **Reported as unsupported**")
	if start < 0 {
		t.Fatal(`api-compatibility.md has no "Reported as unsupported" list`)
	}
	end := strings.Index(text[start+1:], "\n- **")
	if end < 0 {
		t.Fatal("the unsupported list does not end")
	}
	var names []string
	for _, item := range strings.Split(text[start:start+1+end], "\n  - ") {
		volumes := false
		for _, m := range regexp.MustCompile("(volumes )?`([^`]+)`").FindAllStringSubmatch(item, -1) {
			volumes = volumes || m[1] != ""
			name := m[2]
			if slices.Contains(notFields, name) {
				continue
			}
			if volumes && name == "downwardMetrics" {
				name = "volumes " + name
			}
			names = append(names, name)
		}
	}
	return names
}

// TestUnsupportedListIsTrue: every field api-compatibility.md reports as
// unsupported is one vmkit reports (domainxml.Unsupported), and every
// field vmkit reports is in the list:
// the document can neither promise a refusal vmkit no longer makes (a
// feature built since) nor leave out one it makes.
func TestUnsupportedListIsTrue(t *testing.T) {
	listed := unsupportedList(t)
	var cased []string
	for _, c := range unsupportedCases {
		cased = append(cased, c.doc)
		vmi := &v1.VirtualMachineInstance{}
		if err := json.Unmarshal([]byte(`{"spec":`+c.spec+`}`), vmi); err != nil {
			t.Fatalf("%s: %v", c.doc, err)
		}
		errs := domainxml.Unsupported(vmi)
		var fields []string
		for _, e := range errs {
			fields = append(fields, e.Field)
		}
		if !slices.Contains(fields, c.field) || !domainxml.OnlyUnsupported(errs) {
			t.Errorf("api-compatibility.md reports `%s` as unsupported, but vmkit reports %v for %s", c.doc, errs, c.spec)
		}
		if !slices.Contains(listed, c.doc) {
			t.Errorf("vmkit reports %s as unsupported; api-compatibility.md's list does not name `%s`", c.field, c.doc)
		}
	}
	for _, name := range listed {
		if !slices.Contains(cased, name) {
			t.Errorf("api-compatibility.md reports `%s` as unsupported: no case of this test checks that vmkit does (add one, or take it off the list if vmkit supports it now)", name)
		}
	}
	// Every refusal in domainxml's code has its case here: a new one
	// without a line in the document fails.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../domainxml/internal/unsupported/unsupported.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	refusals := 0
	ast.Inspect(f, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok {
			if id, ok := as.Lhs[0].(*ast.Ident); ok && id.Name == "add" {
				return false // the helper itself, which builds each refusal's error
			}
		}
		if call, ok := n.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "add" {
				refusals++
			}
		}
		return true
	})
	if refusals != len(unsupportedCases) {
		t.Errorf("domainxml/internal/unsupported/unsupported.go refuses %d fields, this test and api-compatibility.md know %d", refusals, len(unsupportedCases))
	}
}
