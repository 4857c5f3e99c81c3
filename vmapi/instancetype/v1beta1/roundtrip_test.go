package v1beta1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

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

// TestJSONRoundTripKeepsEveryField decodes each KubeVirt-shaped sample under
// testdata strictly (an unknown field fails) and encodes it again: the
// result must keep every field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("want the samples under testdata, got %v (%v)", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := yaml.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			obj := newObject(t, want["kind"].(string))
			if err := yaml.UnmarshalStrict(raw, obj); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			got, err := wirecompat.ToMap(obj)
			if err != nil {
				t.Fatal(err)
			}
			if md, ok := got["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
				delete(md, "creationTimestamp")
			}
			// Compare as JSON numbers: YAML decoding gives float64 too.
			wantJSON, _ := json.Marshal(want)
			_ = json.Unmarshal(wantJSON, &want)
			if diff := wirecompat.Diff(want, got); diff != "" {
				t.Errorf("round trip changed the object (-in +out):\n%s", diff)
			}
		})
	}
}
