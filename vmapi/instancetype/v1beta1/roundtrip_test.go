package v1beta1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vmkit/vmkit/internal/wirecompat"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
)

func newObject(t *testing.T, kind string) runtime.Object {
	t.Helper()
	switch kind {
	case "VirtualMachineInstancetype":
		return &instancetypev1beta1.VirtualMachineInstancetype{}
	case "VirtualMachineClusterInstancetype":
		return &instancetypev1beta1.VirtualMachineClusterInstancetype{}
	case "VirtualMachinePreference":
		return &instancetypev1beta1.VirtualMachinePreference{}
	case "VirtualMachineClusterPreference":
		return &instancetypev1beta1.VirtualMachineClusterPreference{}
	}
	t.Fatalf("no type for kind %q", kind)
	return nil
}

// TestJSONRoundTripKeepsEveryField: every KubeVirt-shaped sample under
// testdata decodes strictly and encodes again with every field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	wirecompat.TestRoundTrips(t, "testdata/*.yaml", 4, func(t *testing.T, kind string) any { return newObject(t, kind) })
}
