package podtemplate_test

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/podtemplate"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Render the launcher pod of a small VMI: a container disk and 1Gi of memory.
// A controller would now create the pod with
// client.CoreV1().Pods(pod.Namespace).Create.
func Example() {
	renderer, err := podtemplate.New(podtemplate.Config{
		LauncherImage:    "quay.io/kubevirt/virt-launcher:v1.5.0",
		EmulationAllowed: true, // no /dev/kvm needed
	})
	if err != nil {
		panic(err)
	}

	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default", UID: "8d7c6b5a-4e3f-4a2b-9c1d-0e9f8a7b6c5d"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
				Devices:   v1.Devices{Disks: []v1.Disk{{Name: "root"}}},
			},
			Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{
				ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:40"},
			}}},
		},
	}
	pod, err := renderer.RenderLaunchPod(vmi)
	if err != nil {
		panic(err)
	}

	compute := pod.Spec.Containers[0]
	memory := compute.Resources.Requests[corev1.ResourceMemory]
	overhead := renderer.MemoryOverhead(vmi)
	fmt.Println("generateName:", pod.GenerateName)
	fmt.Println("labels:", pod.Labels[v1.AppLabel], pod.Labels[v1.CreatedByLabel])
	fmt.Println("node selector:", pod.Spec.NodeSelector)
	for _, c := range pod.Spec.InitContainers {
		fmt.Println("init container:", c.Name)
	}
	for _, c := range pod.Spec.Containers {
		fmt.Println("container:", c.Name, strings.Join(c.Command, " "))
	}
	fmt.Printf("memory request: %s = 1Gi guest + %s overhead\n", memory.String(), overhead.String())

	// Bad input is an error naming the field, never a half-rendered pod.
	vmi.Spec.Domain.Devices.Disks[0].Name = "data"
	_, err = renderer.RenderLaunchPod(vmi)
	var fieldErr *podtemplate.FieldError
	fmt.Println(errors.As(err, &fieldErr), err)
	// Output:
	// generateName: virt-launcher-demo-
	// labels: virt-launcher 8d7c6b5a-4e3f-4a2b-9c1d-0e9f8a7b6c5d
	// node selector: map[kubevirt.io/schedulable:true]
	// init container: container-disk-binary
	// init container: volumeroot-init
	// container: compute /usr/bin/virt-launcher
	// container: volumeroot /usr/bin/container-disk
	// memory request: 1428Mi = 1Gi guest + 404Mi overhead
	// true VirtualMachineInstance default/demo: spec.domain.devices.disks[0]: volume "data" not found in spec.volumes
}
