package v1beta1_test

import (
	"testing"

	"github.com/vmkit/vmkit/internal/wirecompat"
	exportv1beta1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
)

// TestJSONRoundTripKeepsEveryField: every KubeVirt-shaped sample under
// testdata decodes strictly and encodes again with every field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	wirecompat.TestRoundTrips(t, "testdata/*.yaml", 2, func(*testing.T, string) any { return &exportv1beta1.VirtualMachineExport{} })
}
