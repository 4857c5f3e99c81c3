package v1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/wirecompat"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// newObject returns an empty typed object for a sample's kind.
func newObject(t *testing.T, kind string) runtime.Object {
	t.Helper()
	switch kind {
	case "VirtualMachine":
		return &v1.VirtualMachine{}
	case "VirtualMachineInstance":
		return &v1.VirtualMachineInstance{}
	case "VirtualMachineInstanceReplicaSet":
		return &v1.VirtualMachineInstanceReplicaSet{}
	case "VirtualMachineInstanceMigration":
		return &v1.VirtualMachineInstanceMigration{}
	case "KubeVirt":
		return &v1.KubeVirt{}
	}
	t.Fatalf("no type for kind %q", kind)
	return nil
}

// TestJSONRoundTripKeepsEveryField decodes each KubeVirt-shaped sample under
// testdata strictly (an unknown field fails) into our types and encodes it
// again: the result must equal the input, field for field.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("want the samples under testdata, got %v (%v)", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(in, &want); err != nil {
				t.Fatal(err)
			}
			obj := newObject(t, want["kind"].(string))
			if err := yaml.UnmarshalStrict(raw, obj); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			out, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			// An object never stored has no creationTimestamp; encoding adds null.
			if md, ok := got["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
				delete(md, "creationTimestamp")
			}
			dropNullTemplateTimestamps(got)
			if diff := wirecompat.Diff(want, got); diff != "" {
				t.Errorf("round trip changed the object (-in +out):\n%s", diff)
			}
		})
	}
}

// dropNullTemplateTimestamps removes the creationTimestamp: null that
// metav1.ObjectMeta adds to embedded templates.
func dropNullTemplateTimestamps(obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	if tmpl, ok := spec["template"].(map[string]any); ok {
		if md, ok := tmpl["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
			delete(md, "creationTimestamp")
		}
	}
	if dvts, ok := spec["dataVolumeTemplates"].([]any); ok {
		for _, dvt := range dvts {
			if md, ok := dvt.(map[string]any)["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
				delete(md, "creationTimestamp")
			}
		}
	}
}

// BenchmarkDecodeVirtualMachine measures decoding a large VM manifest.
func BenchmarkDecodeVirtualMachine(b *testing.B) {
	raw, err := os.ReadFile("testdata/vm-full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var vm v1.VirtualMachine
		if err := json.Unmarshal(data, &vm); err != nil {
			b.Fatal(err)
		}
	}
}
