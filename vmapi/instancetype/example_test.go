package instancetype_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Expand a VM's instance type and preference into the spec of its instance.
func ExampleApply() {
	medium := &instancetypev1beta1.VirtualMachineInstancetypeSpec{
		CPU:    instancetypev1beta1.CPUInstancetype{Guest: 4},
		Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("4Gi")},
	}
	spreadTopology := instancetypev1beta1.Spread
	linux := &instancetypev1beta1.VirtualMachinePreferenceSpec{
		CPU:     &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &spreadTopology},
		Devices: &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSATA},
	}
	vm := &v1.VirtualMachine{Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{{Name: "root"}}}}},
	}}}
	vmi := vm.Spec.Template.DeepCopy()
	if conflicts := instancetype.Apply(instancetype.Target{Spec: &vmi.Spec, Meta: &vmi.ObjectMeta}, medium, linux); conflicts != nil {
		panic(conflicts)
	}
	cpu := vmi.Spec.Domain.CPU
	fmt.Println(cpu.Sockets, "sockets,", cpu.Cores, "cores,", vmi.Spec.Domain.Memory.Guest, vmi.Spec.Domain.Devices.Disks[0].Disk.Bus)

	// A template that sets what the instance type sets is a conflict.
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Cores: 2}
	fmt.Println(instancetype.Apply(*instancetype.VMTemplate(vm), medium, linux))
	// Output:
	// 2 sockets, 2 cores, 4Gi sata
	// VM field(s) spec.template.spec.domain.cpu.cores conflicts with selected instance type (which sets spec.cpu.guest)
}
