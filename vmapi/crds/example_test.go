package crds_test

import (
	"fmt"

	"github.com/vmkit/vmkit/vmapi/crds"
)

// Install the CRDs with any client: here we only list what would be created.
func Example() {
	all, err := crds.All()
	if err != nil {
		panic(err)
	}
	for _, crd := range all {
		fmt.Println(crd.Name, crd.Spec.Names.ShortNames)
	}
	// Output:
	// kubevirts.kubevirt.io [kv kvs]
	// virtualmachineclusterinstancetypes.instancetype.kubevirt.io [vmclusterinstancetype vmclusterinstancetypes vmcf vmcfs]
	// virtualmachineclusterpreferences.instancetype.kubevirt.io [vmcp vmcps]
	// virtualmachineexports.export.kubevirt.io [vmexport vmexports]
	// virtualmachineinstancemigrations.kubevirt.io [vmim vmims]
	// virtualmachineinstancepresets.kubevirt.io [vmipreset vmipresets]
	// virtualmachineinstancereplicasets.kubevirt.io [vmirs vmirss]
	// virtualmachineinstances.kubevirt.io [vmi vmis]
	// virtualmachineinstancetypes.instancetype.kubevirt.io [vminstancetype vminstancetypes vmf vmfs]
	// virtualmachinepools.pool.kubevirt.io [vmpool vmpools]
	// virtualmachinepreferences.instancetype.kubevirt.io [vmpref vmprefs vmp vmps]
	// virtualmachinerestores.snapshot.kubevirt.io [vmrestore vmrestores]
	// virtualmachines.kubevirt.io [vm vms]
	// virtualmachinesnapshotcontents.snapshot.kubevirt.io [vmsnapshotcontent vmsnapshotcontents]
	// virtualmachinesnapshots.snapshot.kubevirt.io [vmsnapshot vmsnapshots]
}
