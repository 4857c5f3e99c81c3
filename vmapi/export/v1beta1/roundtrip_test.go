package v1beta1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/wirecompat"
	exportv1beta1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
)

// TestJSONRoundTripKeepsEveryField decodes each KubeVirt-shaped sample under
// testdata strictly (an unknown field fails) and encodes it again: the
// result must keep every field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 2 {
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
			var export exportv1beta1.VirtualMachineExport
			if err := yaml.UnmarshalStrict(raw, &export); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			got, err := wirecompat.ToMap(&export)
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
