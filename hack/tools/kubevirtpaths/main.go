// Command kubevirtpaths lists every schema path of KubeVirt's kubevirt.io/v1
// kinds, read from KubeVirt's OpenAPI document (api/openapi-spec/swagger.json
// in kubevirt/kubevirt at a release tag), one "Kind path type" line each. The
// list is a fact about KubeVirt's API, kept in
// vmapi/crds/testdata/kubevirt-v1-paths.txt, against which
// vmapi/crds's TestKubeVirtPathCoverage measures vmkit's CRDs.
//
// Paths are JSON field names joined by dots, "[]" after a list and "{}"
// after a map; KubeVirt's own definitions are expanded, Kubernetes' (core/v1,
// apimachinery) are leaves of type "k8s:<Definition>", as both projects embed
// them unchanged.
//
//	git -C kubevirt show v1.8.4:api/openapi-spec/swagger.json > swagger.json
//	go run ./kubevirtpaths -swagger swagger.json -release v1.8.4 > ../../vmapi/crds/testdata/kubevirt-v1-paths.txt
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// kinds are the kubevirt.io/v1 kinds listed, by their OpenAPI definition.
var kinds = []string{
	"VirtualMachine",
	"VirtualMachineInstance",
	"VirtualMachineInstanceReplicaSet",
	"VirtualMachineInstanceMigration",
	"VirtualMachineInstancePreset",
	"KubeVirt",
}

// typeName is an OpenAPI type: one name, or several ("string", "null")
// of which the first is kept.
type typeName string

func (t *typeName) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*t = typeName(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return err
	}
	if len(many) > 0 {
		*t = typeName(many[0])
	}
	return nil
}

type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 typeName           `json:"type"`
	Format               string             `json:"format"`
	Enum                 []any              `json:"enum"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties *schema            `json:"additionalProperties"`
}

func main() {
	path := flag.String("swagger", "", "KubeVirt's api/openapi-spec/swagger.json")
	release := flag.String("release", "", "the KubeVirt release the document is from, written in the header")
	flag.Parse()
	if err := run(*path, *release); err != nil {
		fmt.Fprintln(os.Stderr, "kubevirtpaths:", err)
		os.Exit(1)
	}
}

func run(path, release string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]*schema `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Printf("# kubevirt.io/v1 schema paths of KubeVirt %s (from api/openapi-spec/swagger.json by hack/tools/kubevirtpaths)\n", release)
	for _, kind := range kinds {
		root, ok := doc.Definitions["v1."+kind]
		if !ok {
			return fmt.Errorf("%s: no definition v1.%s", path, kind)
		}
		var lines []string
		w := walker{defs: doc.Definitions, emit: func(p, t string) { lines = append(lines, kind+" "+p+" "+t) }}
		for _, top := range []string{"spec", "status"} {
			if s, ok := root.Properties[top]; ok {
				if err := w.walk(top, s, nil); err != nil {
					return fmt.Errorf("%s: %w", kind, err)
				}
			}
		}
		sort.Strings(lines)
		fmt.Println(strings.Join(lines, "\n"))
	}
	return nil
}

type walker struct {
	defs map[string]*schema
	emit func(path, typ string)
}

func (w walker) walk(path string, s *schema, seen []string) error {
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/definitions/")
		if strings.HasPrefix(name, "k8s.io.") {
			w.emit(path, "k8s:"+name[strings.LastIndex(name, ".")+1:])
			return nil
		}
		for _, n := range seen {
			if n == name {
				w.emit(path, "recursive:"+name)
				return nil
			}
		}
		def, ok := w.defs[name]
		if !ok {
			return fmt.Errorf("%s: unknown definition %s", path, name)
		}
		return w.walk(path, def, append(seen, name))
	}
	switch {
	case s.Type == "array" && s.Items != nil:
		w.emit(path, "array")
		return w.walk(path+"[]", s.Items, seen)
	case s.AdditionalProperties != nil:
		w.emit(path, "map")
		return w.walk(path+"{}", s.AdditionalProperties, seen)
	case len(s.Properties) > 0:
		w.emit(path, "object")
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := w.walk(path+"."+n, s.Properties[n], seen); err != nil {
				return err
			}
		}
		return nil
	}
	t := string(s.Type)
	if t == "" {
		t = "object"
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprint(v)
		}
		t += "=" + strings.Join(vals, "|")
	}
	w.emit(path, t)
	return nil
}
