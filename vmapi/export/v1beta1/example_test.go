package v1beta1_test

import (
	"fmt"

	"sigs.k8s.io/yaml"

	exportv1beta1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
)

// KubeVirt's export manifests, and what virtctl vmexport creates, decode
// into these types unchanged.
func Example() {
	manifest := []byte(`
apiVersion: export.kubevirt.io/v1beta1
kind: VirtualMachineExport
metadata:
  name: example-export
spec:
  source:
    apiGroup: kubevirt.io
    kind: VirtualMachine
    name: example-vm
  ttlDuration: 30m
`)
	var export exportv1beta1.VirtualMachineExport
	if err := yaml.UnmarshalStrict(manifest, &export); err != nil {
		panic(err)
	}
	fmt.Println(export.Spec.Source.Kind, export.Spec.Source.Name, export.Spec.TTLDuration.Duration)
	// Output: VirtualMachine example-vm 30m0s
}
