package livemigration_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vmkit/vmkit/nodeagent/livemigration"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// A node agent's migration settings (virt-handler's --migration-* flags)
// become the source launcher's request to migrate a VMI: the completion
// timeout scales with the guest's memory; the settings the migration
// controller copied from the KubeVirt CR into the VMI's
// status.migrationState win over the agent's.
func ExampleConfig_MigrateRequest() {
	cfg := &livemigration.Config{Address: "10.0.0.5", BandwidthMiB: 64}
	vmi := &v1.VirtualMachineInstance{
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
		}}},
		Status: v1.VirtualMachineInstanceStatus{MigrationState: &v1.VirtualMachineInstanceMigrationState{MigrationUID: "m1"}},
	}
	req := cfg.MigrateRequest(vmi)
	fmt.Println(req.MigrationUID, req.BandwidthMiB, req.Timeout.Duration, req.ProgressTimeout.Duration)

	postCopy := true
	vmi.Status.MigrationState.MigrationConfiguration = &v1.MigrationConfiguration{AllowPostCopy: &postCopy}
	fmt.Println("post-copy:", cfg.MigrateRequest(vmi).PostCopy)
	// Output:
	// m1 64 10m0s 2m30s
	// post-copy: true
}
