package crds_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmkit/vmkit/vmapi/crds"
)

var update = flag.Bool("update", false, "rewrite testdata/kubevirt-v1-gaps.txt with the gaps found")

// kubevirtPath is one line of testdata/kubevirt-v1-paths.txt: a schema path
// of KubeVirt's API (see hack/tools/kubevirtpaths).
type kubevirtPath struct {
	kind, path, typ string
}

func readKubeVirtPaths(t *testing.T) []kubevirtPath {
	t.Helper()
	f, err := os.Open("testdata/kubevirt-v1-paths.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []kubevirtPath
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("testdata/kubevirt-v1-paths.txt: bad line %q", line)
		}
		out = append(out, kubevirtPath{fields[0], fields[1], fields[2]})
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lookup follows a path (fields joined by ".", "[]" for list items, "{}"
// for map values) through a schema. It returns the schema at the path, or
// nil and the reason it is not there. A subtree that preserves unknown
// fields accepts the rest of the path untyped: preserved is then true.
func lookup(root *apiextensionsv1.JSONSchemaProps, path string) (s *apiextensionsv1.JSONSchemaProps, preserved bool, missing string) {
	s = root
	for _, part := range strings.Split(path, ".") {
		name, suffix, _ := strings.Cut(part, "[")
		if rest, ok := strings.CutSuffix(name, "{}"); ok {
			name, suffix = rest, "{}"+suffix
		}
		if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && s.Properties[name].Type == "" && len(s.Properties[name].Properties) == 0 {
			if _, ok := s.Properties[name]; !ok {
				return s, true, ""
			}
		}
		child, ok := s.Properties[name]
		if !ok {
			return nil, false, "no field " + name
		}
		s = &child
		for suffix != "" {
			switch {
			case strings.HasPrefix(suffix, "[]") || strings.HasPrefix(suffix, "]"):
				if s.Items == nil || s.Items.Schema == nil {
					return nil, false, name + " is not a list"
				}
				s = s.Items.Schema
				suffix = strings.TrimPrefix(strings.TrimPrefix(suffix, "[]"), "]")
			case strings.HasPrefix(suffix, "{}"):
				if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
					if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
						return s, true, ""
					}
					return nil, false, name + " is not a map"
				}
				s = s.AdditionalProperties.Schema
				suffix = strings.TrimPrefix(suffix, "{}")
			default:
				return nil, false, "bad path suffix " + suffix
			}
		}
	}
	return s, false, ""
}

// mismatch says how a KubeVirt value of type typ would fail s, or "".
func mismatch(s *apiextensionsv1.JSONSchemaProps, typ string) string {
	base, enum, _ := strings.Cut(typ, "=")
	switch base {
	case "object", "array", "map":
		// Containers: their members are paths of their own.
		want := map[string]string{"object": "object", "array": "array", "map": "object"}[base]
		if s.Type != want && !(s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields) {
			return fmt.Sprintf("type %q, KubeVirt's is %s", s.Type, base)
		}
		return ""
	case "string", "integer", "boolean", "number":
		if s.XIntOrString && (base == "string" || base == "integer") {
			return ""
		}
		if s.Type != base && !(base == "integer" && s.Type == "number") {
			return fmt.Sprintf("type %q, KubeVirt's is %s", s.Type, base)
		}
	}
	if enum != "" && len(s.Enum) > 0 {
		have := map[string]bool{}
		for _, e := range s.Enum {
			have[strings.Trim(string(e.Raw), `"`)] = true
		}
		var lacking []string
		for _, v := range strings.Split(enum, "|") {
			if !have[v] {
				lacking = append(lacking, v)
			}
		}
		if len(lacking) > 0 {
			return "enum lacks " + strings.Join(lacking, ",")
		}
	}
	return ""
}

// TestKubeVirtPathCoverage measures vmkit's kubevirt.io/v1 CRDs against
// every schema path of KubeVirt's (testdata/kubevirt-v1-paths.txt) and
// compares what is missing or typed differently with
// testdata/kubevirt-v1-gaps.txt, so a field lost from a schema fails here
// and a field gained shows in the gaps file's diff (go test -run
// TestKubeVirtPathCoverage ./vmapi/crds -update). The counts are logged
// (-v).
func TestKubeVirtPathCoverage(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, crd := range all {
		if crd.Spec.Group == "kubevirt.io" {
			schemas[crd.Spec.Names.Kind] = crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		}
	}
	type count struct{ total, covered, preserved int }
	counts := map[string]*count{}
	var kinds, gaps []string
	for _, p := range readKubeVirtPaths(t) {
		c := counts[p.kind]
		if c == nil {
			c = &count{}
			counts[p.kind] = c
			kinds = append(kinds, p.kind)
		}
		c.total++
		root, ok := schemas[p.kind]
		if !ok {
			gaps = append(gaps, fmt.Sprintf("%s %s: no CRD", p.kind, p.path))
			continue
		}
		s, preserved, why := lookup(root, p.path)
		switch {
		case why != "":
			gaps = append(gaps, fmt.Sprintf("%s %s: %s", p.kind, p.path, why))
		case preserved:
			c.preserved++
		default:
			if m := mismatch(s, p.typ); m != "" {
				gaps = append(gaps, fmt.Sprintf("%s %s: %s", p.kind, p.path, m))
				continue
			}
			c.covered++
		}
	}
	total := count{}
	for _, k := range kinds {
		c := counts[k]
		t.Logf("%-34s %4d of %4d paths typed as KubeVirt's (%5.1f%%), %d accepted untyped", k, c.covered, c.total, 100*float64(c.covered)/float64(c.total), c.preserved)
		total.total += c.total
		total.covered += c.covered
		total.preserved += c.preserved
	}
	t.Logf("%-34s %4d of %4d paths typed as KubeVirt's (%5.1f%%), %d accepted untyped", "all", total.covered, total.total, 100*float64(total.covered)/float64(total.total), total.preserved)

	sort.Strings(gaps)
	const gapsFile = "testdata/kubevirt-v1-gaps.txt"
	got := strings.Join(gaps, "\n")
	if got != "" {
		got += "\n"
	}
	if *update {
		if err := os.WriteFile(gapsFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(gapsFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("gaps against KubeVirt's schema changed (-%s +now); run with -update if intended:\n%s", gapsFile, diff)
	}
}
