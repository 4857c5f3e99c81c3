package v1beta1_test

import (
	"testing"

	"github.com/vmkit/vmkit/internal/wirecompat"
	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
)

// TestJSONRoundTripKeepsEveryField: every KubeVirt-shaped sample under
// testdata decodes strictly and encodes again with every field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	wirecompat.TestRoundTrips(t, "testdata/*.yaml", 2, func(*testing.T, string) any { return &poolv1beta1.VirtualMachinePool{} })
}
