package v1beta1_test

import (
	"testing"

	"github.com/vmkit/vmkit/internal/wirecompat"
	snapshotv1beta1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
)

// TestJSONRoundTripKeepsEveryField: every KubeVirt-shaped sample under
// testdata decodes strictly and encodes again with every field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	wirecompat.TestRoundTrips(t, "testdata/*.yaml", 4, func(t *testing.T, kind string) any {
		switch kind {
		case "VirtualMachineSnapshot":
			return &snapshotv1beta1.VirtualMachineSnapshot{}
		case "VirtualMachineSnapshotContent":
			return &snapshotv1beta1.VirtualMachineSnapshotContent{}
		case "VirtualMachineRestore":
			return &snapshotv1beta1.VirtualMachineRestore{}
		}
		t.Fatalf("no type for kind %q", kind)
		return nil
	})
}
