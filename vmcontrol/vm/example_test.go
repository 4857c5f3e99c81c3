package vm_test

import (
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
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

// NewExpandedVMI builds the instance of a VM with an instance type and a
// preference: here examples/vm-instancetype.yaml, the tiny guest sized by
// the instance type tiny. The controller takes the specs from the
// ControllerRevisions the VM pinned; this example from the manifest.
func ExampleNewExpandedVMI() {
	raw, err := os.ReadFile("../../examples/vm-instancetype.yaml")
	if err != nil {
		panic(err)
	}
	var (
		machine v1.VirtualMachine
		x       vm.Expansion
	)
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var it instancetypev1beta1.VirtualMachineInstancetype
		var pref instancetypev1beta1.VirtualMachinePreference
		switch {
		case strings.Contains(doc, "\nkind: VirtualMachineInstancetype\n"):
			err = yaml.UnmarshalStrict([]byte(doc), &it)
			x.Instancetype = &it.Spec
			x.InstancetypeRef = &v1.InstancetypeStatusRef{Name: it.Name, Kind: it.Kind}
		case strings.Contains(doc, "\nkind: VirtualMachinePreference\n"):
			err = yaml.UnmarshalStrict([]byte(doc), &pref)
			x.Preference = &pref.Spec
			x.PreferenceRef = &v1.InstancetypeStatusRef{Name: pref.Name, Kind: pref.Kind}
		default:
			err = yaml.UnmarshalStrict([]byte(doc), &machine)
		}
		if err != nil {
			panic(err)
		}
	}
	vmi, err := vm.NewExpandedVMI(&machine, x)
	if err != nil {
		panic(err)
	}
	d := vmi.Spec.Domain
	fmt.Println(d.CPU.Sockets, "vCPU,", d.Memory.Guest, "guest memory,", d.Resources.Requests.Memory(), "requested")
	fmt.Println("machine", d.Machine.Type, "grace", *vmi.Spec.TerminationGracePeriodSeconds, "interfaces", len(d.Devices.Interfaces))
	fmt.Println(vmi.Annotations[v1.InstancetypeAnnotation], vmi.Annotations[v1.PreferenceAnnotation])
	// Output:
	// 1 vCPU, 128Mi guest memory, 128Mi requested
	// machine pc grace 2 interfaces 0
	// tiny tiny-guest
}
