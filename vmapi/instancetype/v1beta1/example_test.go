package v1beta1_test

import (
	"fmt"

	"sigs.k8s.io/yaml"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
)

// KubeVirt's instance types decode into these types unchanged.
func Example() {
	manifest := []byte(`
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: u1.small
spec:
  cpu:
    guest: 1
  memory:
    guest: 2Gi
`)
	var it instancetypev1beta1.VirtualMachineClusterInstancetype
	if err := yaml.UnmarshalStrict(manifest, &it); err != nil {
		panic(err)
	}
	fmt.Println(it.Name, it.Spec.CPU.Guest, "vCPU", it.Spec.Memory.Guest.String())
	// Output: u1.small 1 vCPU 2Gi
}
