package operator_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	"github.com/vmkit/vmkit/vmcontrol/operator"
)

// The controller takes clients, a KubeVirt informer and the operator's own
// config; cmd/virt-operator reads that config from its environment with
// installstrategy.ConfigFromEnv and runs the controller under leader election.
func ExampleNew() {
	client := fake.NewSimpleClientset()
	factory := externalversions.NewSharedInformerFactory(client, 0)
	ctl, err := operator.New(operator.Config{
		Client:    client,
		Dynamic:   dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		KubeVirts: factory.Kubevirt().V1().KubeVirts(),
		Operator:  (&installstrategy.DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0"}).SetID(),
		// Strategies defaults to operator.Generated{}; use
		// &operator.ConfigMapStrategies{...} to load them from dump Jobs.
	})
	fmt.Println(ctl != nil, err)

	_, err = operator.New(operator.Config{Client: client})
	fmt.Println(err)
	// Output:
	// true <nil>
	// operator: Client, Dynamic, KubeVirts and Operator are required
}
