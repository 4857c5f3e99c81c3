package v1beta1_test

import (
	"fmt"

	"sigs.k8s.io/yaml"

	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
)

// KubeVirt's pool manifests decode into these types unchanged.
func Example() {
	manifest := []byte(`
apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      kubevirt.io/vmpool: web
  virtualMachineTemplate:
    metadata:
      labels:
        kubevirt.io/vmpool: web
    spec:
      runStrategy: Always
      template:
        spec:
          domain:
            devices: {}
`)
	var pool poolv1beta1.VirtualMachinePool
	if err := yaml.UnmarshalStrict(manifest, &pool); err != nil {
		panic(err)
	}
	fmt.Println(pool.Name, *pool.Spec.Replicas, *pool.Spec.VirtualMachineTemplate.Spec.RunStrategy)
	// Output: web 2 Always
}
