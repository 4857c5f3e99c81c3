package snapshot_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	"github.com/vmkit/vmkit/vmcontrol/snapshot"
)

// A snapshot's content is named after its UID, as KubeVirt names it.
func ExampleContentName() {
	snap := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "before-upgrade", UID: "28eedf08"}}
	fmt.Println(snapshot.ContentName(snap))
	// Output: vmsnapshot-content-28eedf08
}
