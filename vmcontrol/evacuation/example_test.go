package evacuation_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/evacuation"
)

// A node tainted kubevirt.io/drain:NoSchedule is evacuated; each VMI on it
// gets a migration like this one.
func ExampleNewMigration() {
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: evacuation.DrainTaintKey, Effect: corev1.TaintEffectNoSchedule}}}}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
	m := evacuation.NewMigration(vmi, "node01")
	fmt.Println(evacuation.Drained(node), m.GenerateName, m.Spec.VMIName, m.Annotations[evacuation.MigrationAnnotation])
	// Output: true kubevirt-evacuation- web node01
}
