package vm_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/vm"
)

// NewVMI shows what the controller creates when a VM starts.
func ExampleNewVMI() {
	machine := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "testvm", Namespace: "default", UID: "1234", Generation: 3},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/size": "small"}},
			},
		},
	}
	vmi, err := vm.NewVMI(machine)
	if err != nil {
		panic(err)
	}
	ref := metav1.GetControllerOf(vmi)
	fmt.Println(vmi.Namespace+"/"+vmi.Name, ref.Kind, ref.Name)
	fmt.Println(vmi.Labels)
	fmt.Println(vmi.Annotations[vm.GenerationAnnotation], vmi.Finalizers)
	fmt.Println(vmi.Spec.Domain.Firmware.UUID)
	// The spec defaults are filled in: a template with neither interfaces
	// nor networks gets the default pod interface.
	iface := vmi.Spec.Domain.Devices.Interfaces[0]
	fmt.Println(iface.Name, iface.Bridge != nil, vmi.Spec.Networks[0].Pod != nil)
	// Output:
	// default/testvm VirtualMachine testvm
	// map[kubevirt.io/size:small vm.kubevirt.io/name:testvm]
	// 3 [kubevirt.io/virtualMachineControllerFinalize]
	// 5a9fc181-957e-5c32-9e5a-2de5e9673531
	// default true true
}
