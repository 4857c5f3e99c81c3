package v1_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// newExampleVM builds a VM that keeps a Fedora guest running.
func newExampleVM() *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "fedora", Namespace: "default"},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/vm": "fedora"}},
				Spec: v1.VirtualMachineInstanceSpec{
					Domain: v1.DomainSpec{
						Resources: v1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
						},
						Devices: v1.Devices{Disks: []v1.Disk{{Name: "root"}}},
					},
					Volumes: []v1.Volume{{
						Name:         "root",
						VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:40"}},
					}},
				},
			},
		},
	}
}

// Default a VM as the API server would, validate it, and read its run strategy.
func ExampleValidateVirtualMachine() {
	vm := newExampleVM()
	v1.SetDefaults_VirtualMachine(vm)
	strategy, err := vm.RunStrategy()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run strategy:", strategy)
	fmt.Println("root disk bus:", vm.Spec.Template.Spec.Domain.Devices.Disks[0].Disk.Bus)
	fmt.Println("interface:", vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].Name)
	fmt.Println("validation errors:", len(v1.ValidateVirtualMachine(vm)))

	broken := vm.DeepCopy()
	broken.Spec.Running = v1.BoolPtr(true)
	broken.Spec.Template.Spec.Domain.Resources.Requests = nil
	broken.Spec.Template.Spec.Domain.Memory = nil
	broken.Spec.Template.Spec.Volumes[0].Name = "rootdisk"
	for _, err := range v1.ValidateVirtualMachine(broken) {
		fmt.Println(err)
	}
	// Output:
	// run strategy: Always
	// root disk bus: virtio
	// interface: default
	// validation errors: 0
	// spec.running: Forbidden: spec.running and spec.runStrategy are mutually exclusive: remove the deprecated spec.running
	// spec.template.spec.domain.resources.requests.memory: Required value: the guest needs memory: set spec.template.spec.domain.memory.guest or spec.template.spec.domain.resources.requests.memory
	// spec.template.spec.domain.devices.disks[0].name: Not found: "root": no volume of this name in spec.template.spec.volumes
}

// A VM's run strategy comes from spec.runStrategy or the deprecated spec.running.
func ExampleVirtualMachine_RunStrategy() {
	vm := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "fedora", Namespace: "default"},
		Spec:       v1.VirtualMachineSpec{Running: v1.BoolPtr(true)},
	}
	strategy, err := vm.RunStrategy()
	fmt.Println(strategy, err)

	vm.Spec.RunStrategy = v1.RunStrategyPtr(v1.RunStrategyManual)
	_, err = vm.RunStrategy()
	fmt.Println(err)
	// Output:
	// Always <nil>
	// VirtualMachine default/fedora: spec.running and spec.runStrategy are mutually exclusive
}
