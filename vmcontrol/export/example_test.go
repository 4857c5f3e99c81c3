package export_test

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	exportv1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	"github.com/vmkit/vmkit/vmcontrol/export"
)

// The names KubeVirt's virtctl looks for, and when an export ends.
func Example() {
	e := &exportv1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{
		Name: "backup", Namespace: "default", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)),
	}}
	fmt.Println(export.ServiceName(e), export.DefaultTokenSecretName(e), export.ExpirationTime(e).Format(time.RFC3339))
	// Output: virt-export-backup export-token-backup 2026-11-29T02:00:00Z
}
