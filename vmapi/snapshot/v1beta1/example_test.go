package v1beta1_test

import (
	"fmt"

	"sigs.k8s.io/yaml"

	snapshotv1beta1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
)

// KubeVirt's snapshot manifests decode into these types unchanged.
func Example() {
	manifest := []byte(`
apiVersion: snapshot.kubevirt.io/v1beta1
kind: VirtualMachineSnapshot
metadata:
  name: snap-larry
spec:
  source:
    apiGroup: kubevirt.io
    kind: VirtualMachine
    name: larry
`)
	var snap snapshotv1beta1.VirtualMachineSnapshot
	if err := yaml.UnmarshalStrict(manifest, &snap); err != nil {
		panic(err)
	}
	fmt.Println(snap.Spec.Source.Kind, snap.Spec.Source.Name)
	// Output: VirtualMachine larry
}
