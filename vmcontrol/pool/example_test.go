package pool_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/pool"
)

// NewVM shows the VM a pool creates for one index: its name, its owner and
// its own DataVolume.
func ExampleNewVM() {
	replicas := int32(2)
	p := &poolv1beta1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec: poolv1beta1.VirtualMachinePoolSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io/vmpool": "web"}},
			VirtualMachineTemplate: &poolv1beta1.VirtualMachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/vmpool": "web"}},
				Spec: v1.VirtualMachineSpec{
					DataVolumeTemplates: []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "rootdisk"}}},
					Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
						{Name: "rootdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "rootdisk"}}},
					}}},
				},
			},
		},
	}
	vm, err := pool.NewVM(p, 1)
	if err != nil {
		panic(err)
	}
	ref := metav1.GetControllerOf(vm)
	fmt.Println(vm.Namespace+"/"+vm.Name, vm.Labels, ref.Kind, ref.Name)
	fmt.Println(vm.Spec.DataVolumeTemplates[0].ObjectMeta.Name, vm.Spec.Template.Spec.Volumes[0].DataVolume.Name)
	// Output:
	// default/web-1 map[kubevirt.io/vmpool:web] VirtualMachinePool web
	// rootdisk-1 rootdisk-1
}
