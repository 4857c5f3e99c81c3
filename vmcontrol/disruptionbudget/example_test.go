package disruptionbudget_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/disruptionbudget"
)

// A VMI whose eviction should migrate it gets this budget: one launcher pod
// of the VMI must stay (two while it migrates).
func ExampleNewBudget() {
	live := v1.EvictionStrategyLiveMigrate
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "4f9c"},
		Spec:       v1.VirtualMachineInstanceSpec{EvictionStrategy: &live},
	}
	pdb := disruptionbudget.NewBudget(vmi)
	fmt.Println(disruptionbudget.Wanted(vmi, nil), pdb.GenerateName, pdb.Spec.MinAvailable, pdb.Spec.Selector.MatchLabels, pdb.OwnerReferences[0].Kind)
	// Output: true kubevirt-disruption-budget- 1 map[kubevirt.io/created-by:4f9c] VirtualMachineInstance
}
