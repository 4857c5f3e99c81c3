package installstrategy

import (
	"slices"
	"testing"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestControllerMayRunPools checks virt-controller's rules against what the
// pool controller (vmcontrol/pool) sends: the controllers' integration tests
// run as a cluster admin and would not notice a missing verb.
func TestControllerMayRunPools(t *testing.T) {
	var rules ComponentRules
	for _, r := range Rules() {
		if r.Component == v1.VirtControllerValue {
			rules = r
		}
	}
	allowed := func(group, resource, verb string) bool {
		for _, r := range rules.Cluster {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, want := range []struct{ group, resource, verb string }{
		{"pool.kubevirt.io", "virtualmachinepools", "get"},
		{"pool.kubevirt.io", "virtualmachinepools", "list"},
		{"pool.kubevirt.io", "virtualmachinepools", "watch"},
		{"pool.kubevirt.io", "virtualmachinepools/status", "update"},
		{"pool.kubevirt.io", "virtualmachinepools/finalizers", "update"},
		{"kubevirt.io", "virtualmachines", "create"},
		{"kubevirt.io", "virtualmachines", "delete"},
		{"kubevirt.io", "virtualmachines", "patch"}, // adoption and release
		{"kubevirt.io", "virtualmachines", "list"},
		{"kubevirt.io", "virtualmachines", "watch"},
		{"", "events", "create"},
	} {
		if !allowed(want.group, want.resource, want.verb) {
			t.Errorf("virt-controller may not %s %s in group %q", want.verb, want.resource, want.group)
		}
	}
}
