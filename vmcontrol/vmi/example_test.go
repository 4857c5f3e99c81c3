package vmi_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
	"github.com/vmkit/vmkit/vmcontrol/vmi"
)

// minimalRenderer stands in for podtemplate.Renderer.
type minimalRenderer struct{}

func (minimalRenderer) RenderLaunchPod(instance *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "virt-launcher-" + instance.Name, Namespace: instance.Namespace,
		Labels: map[string]string{v1.CreatedByLabel: string(instance.UID)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance",
			Name: instance.Name, UID: instance.UID, Controller: &yes}},
	}}, nil
}

// Run the controller alone, on shared informers you own.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default", UID: "u1"}})
	kube := kubefake.NewSimpleClientset()
	factory := externalversions.NewSharedInformerFactory(client, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	// A client-go clientset's pods satisfy kubeclient.PodInterface; in a
	// controller binary kubeclient.NewForConfig keeps the other API groups out.
	pods := kubeclient.PodsGetterFunc(func(ns string) kubeclient.PodInterface { return kube.CoreV1().Pods(ns) })
	c, err := vmi.New(vmi.Config{
		Client: client.KubevirtV1(), Kube: pods, Renderer: minimalRenderer{},
		VMIs: factory.Kubevirt().V1().VirtualMachineInstances().Informer(), Pods: kubeFactory.Core().V1().Pods().Informer(),
	})
	if err != nil {
		panic(err)
	}
	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	go func() { _ = c.Start(ctx) }()

	for ctx.Err() == nil {
		got, _ := client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, "demo", metav1.GetOptions{})
		if got.Status.Phase == v1.Scheduling {
			pods, _ := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			fmt.Println(got.Status.Phase, len(pods.Items), pods.Items[0].Name)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: Scheduling 1 virt-launcher-demo
}
