package kubeclient_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// Code that already holds a client-go clientset passes its typed clients
// where kubeclient's interfaces are asked for (vmi.Config.Kube, for one).
// A controller binary uses kubeclient.NewForConfig instead, and so links only
// the API groups it uses.
func ExamplePodsGetterFunc() {
	clientset := fake.NewClientset()
	var pods kubeclient.PodsGetter = kubeclient.PodsGetterFunc(func(ns string) kubeclient.PodInterface {
		return clientset.CoreV1().Pods(ns)
	})
	ctx := context.Background()
	_, err := pods.Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	list, err := clientset.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(list.Items), list.Items[0].Name)
	// Output: 1 virt-launcher-vm
}
