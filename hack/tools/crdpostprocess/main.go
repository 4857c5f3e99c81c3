// Command crdpostprocess turns controller-gen's CRDs into the ones vmkit
// ships. For kubevirt.io, v1 stays the storage version and v1alpha3 is
// served, deprecated, with the same schema, so older KubeVirt manifests still
// apply; other groups (instancetype.kubevirt.io) serve their one version.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	in := flag.String("in", "", "directory holding controller-gen's CRD YAML files")
	out := flag.String("out", "", "directory to write the final CRD YAML files to")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "crdpostprocess:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	files, err := filepath.Glob(filepath.Join(in, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRD files in %q", in)
	}
	sort.Strings(files)
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if crd.Spec.Group == "kubevirt.io" {
			if err := addV1alpha3(&crd); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		} else if len(crd.Spec.Versions) != 1 {
			return fmt.Errorf("%s: want exactly one version from controller-gen", f)
		}
		crd.Annotations = map[string]string{"vmkit.io/generated-by": "hack/update-codegen.sh"}
		data, err = yaml.Marshal(&crd)
		if err != nil {
			return err
		}
		// The status and creationTimestamp fields controller-gen leaves empty are noise.
		data = []byte(strings.Replace(string(data), "  creationTimestamp: null\n", "", 1))
		if i := strings.Index(string(data), "\nstatus:\n"); i >= 0 {
			data = data[:i+1]
		}
		name := filepath.Join(out, crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml")
		if err := os.WriteFile(name, append([]byte("---\n"), data...), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func addV1alpha3(crd *apiextensionsv1.CustomResourceDefinition) error {
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" {
		return fmt.Errorf("CRD %s: want exactly version v1 from controller-gen", crd.Name)
	}
	v1 := crd.Spec.Versions[0]
	v1.Served, v1.Storage = true, true
	old := *v1.DeepCopy()
	old.Name = "v1alpha3"
	old.Storage = false
	old.Deprecated = true
	warning := "kubevirt.io/v1alpha3 is deprecated; use kubevirt.io/v1"
	if v1.Deprecated && v1.DeprecationWarning != nil {
		// A kind deprecated in v1 too (VirtualMachineInstancePreset): its
		// v1alpha3 warning is KubeVirt's, the v1 one with the version
		// changed.
		warning = strings.Replace(*v1.DeprecationWarning, "kubevirt.io/v1 ", "kubevirt.io/v1alpha3 ", 1)
	}
	old.DeprecationWarning = &warning
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v1, old}
	return nil
}
