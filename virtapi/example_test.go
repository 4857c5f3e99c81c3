package virtapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/virtapi"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// A stop of a VM whose run strategy is Always sets it to Halted, as
// KubeVirt's virt-api does. Serve wraps Handler in the cluster's
// authentication and authorization; here the bare handler answers.
func Example() {
	vm := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "default"},
		Spec:       v1.VirtualMachineSpec{RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways)},
	}
	kv := fake.NewSimpleClientset(vm)
	kube := kubefake.NewSimpleClientset()
	srv, err := virtapi.New(virtapi.Config{Kube: kube, Kubevirt: kv, Handlers: &virtapi.HandlerPods{Kube: kube, Namespace: "kubevirt", Port: 8186}})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPut, virtapi.Prefix+"/namespaces/default/virtualmachines/vm1/stop", nil))
	got, _ := kv.KubevirtV1().VirtualMachines("default").Get(context.Background(), "vm1", metav1.GetOptions{})
	fmt.Println(rec.Code, *got.Spec.RunStrategy)
	// Output: 202 Halted
}
