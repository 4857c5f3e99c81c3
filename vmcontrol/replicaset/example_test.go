package replicaset_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/replicaset"
)

// NewVMI shows the instance a replica set creates from its template.
func ExampleNewVMI() {
	replicas := int32(3)
	rs := &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}},
		},
	}
	vmi, err := replicaset.NewVMI(rs, nil)
	if err != nil {
		panic(err)
	}
	ref := metav1.GetControllerOf(vmi)
	fmt.Println(vmi.Namespace+"/"+vmi.GenerateName, vmi.Labels, ref.Kind, ref.Name)
	fmt.Println(vmi.Spec.Domain.Devices.Interfaces[0].Name, vmi.Spec.Networks[0].Pod != nil)

	rs.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "db"}
	_, err = replicaset.NewVMI(rs, nil)
	fmt.Println(err)
	// Output:
	// default/web map[app:web] VirtualMachineInstanceReplicaSet web
	// default true
	// VirtualMachineInstanceReplicaSet default/web: spec.selector does not match spec.template.metadata.labels (without the labels reserved to KubeVirt's components)
}
