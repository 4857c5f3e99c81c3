package wirecompat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestRoundTrips decodes each YAML sample matching pattern strictly (an
// unknown field fails) into the object newObject returns for its kind, and
// encodes it again: the result must keep every field. At least min samples
// must match. It is the round-trip test of every vmapi package.
func TestRoundTrips(t *testing.T, pattern string, min int, newObject func(t *testing.T, kind string) any) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) < min {
		t.Fatalf("want at least %d samples matching %s, got %v (%v)", min, pattern, files, err)
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
			kind, _ := want["kind"].(string)
			obj := newObject(t, kind)
			if err := yaml.UnmarshalStrict(raw, obj); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			got, err := ToMap(obj)
			if err != nil {
				t.Fatal(err)
			}
			if md, ok := got["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
				delete(md, "creationTimestamp")
			}
			// Compare as JSON numbers: YAML decoding gives float64 too.
			wantJSON, _ := json.Marshal(want)
			_ = json.Unmarshal(wantJSON, &want)
			if diff := Diff(want, got); diff != "" {
				t.Errorf("round trip changed the object (-in +out):\n%s", diff)
			}
		})
	}
}
