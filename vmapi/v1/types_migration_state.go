package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MigrationPriority orders migrations waiting for a slot.
//
// +kubebuilder:validation:Enum=system-critical;user-triggered;system-maintenance
type MigrationPriority string

// Migration priorities, most urgent first.
const (
	PrioritySystemCritical    MigrationPriority = "system-critical"
	PriorityUserTriggered     MigrationPriority = "user-triggered"
	PrioritySystemMaintenance MigrationPriority = "system-maintenance"
)

// MigrationAbortStatus is the state of a migration's abort.
type MigrationAbortStatus string

// Abort states.
const (
	MigrationAbortSucceeded  MigrationAbortStatus = "Succeeded"
	MigrationAbortFailed     MigrationAbortStatus = "Failed"
	MigrationAbortInProgress MigrationAbortStatus = "Aborting"
)

// VirtualMachineInstanceMigrationSource makes a migration the sending half
// of a migration between clusters (decentralized live migration).
type VirtualMachineInstanceMigrationSource struct {
	// MigrationID pairs the sending and the receiving migration.
	MigrationID string `json:"migrationID"`
	// ConnectURL is the receiving side's synchronization address.
	ConnectURL string `json:"connectURL"`
}

// VirtualMachineInstanceMigrationTarget makes a migration the receiving
// half of a migration between clusters.
type VirtualMachineInstanceMigrationTarget struct {
	// MigrationID pairs the sending and the receiving migration.
	MigrationID string `json:"migrationID"`
}

// VirtualMachineInstanceMigrationSourceState is the sending side of a
// migration.
type VirtualMachineInstanceMigrationSourceState struct {
	// MigrationUID of the migration.
	// +optional
	MigrationUID types.UID `json:"migrationUID,omitempty"`
	// VirtualMachineInstanceUID of the migrating VMI.
	// +optional
	VirtualMachineInstanceUID *types.UID `json:"virtualMachineInstanceUID,omitempty"`
	// DomainName of the libvirt domain.
	// +optional
	DomainName *string `json:"domainName,omitempty"`
	// DomainNamespace of the libvirt domain.
	// +optional
	DomainNamespace *string `json:"domainNamespace,omitempty"`
	// Node the migration leaves.
	// +optional
	Node string `json:"node,omitempty"`
	// Pod the migration leaves.
	// +optional
	Pod string `json:"pod,omitempty"`
	// SyncAddress is the sending side's synchronization address.
	// +optional
	SyncAddress *string `json:"syncAddress,omitempty"`
	// PersistentStatePVCName is the claim of the persistent state (TPM,
	// EFI variables) on the sending side.
	// +optional
	PersistentStatePVCName string `json:"persistentStatePVCName,omitempty"`
	// SELinuxContext of the sending launcher.
	// +optional
	SELinuxContext string `json:"selinuxContext,omitempty"`
	// NodeSelectors of the sending side, carried to the receiving one.
	// +optional
	NodeSelectors map[string]string `json:"nodeSelectors,omitempty"`
}

// VirtualMachineInstanceMigrationTargetState is the receiving side of a
// migration.
type VirtualMachineInstanceMigrationTargetState struct {
	// MigrationUID of the migration.
	// +optional
	MigrationUID types.UID `json:"migrationUID,omitempty"`
	// VirtualMachineInstanceUID of the migrating VMI.
	// +optional
	VirtualMachineInstanceUID *types.UID `json:"virtualMachineInstanceUID,omitempty"`
	// DomainName of the libvirt domain.
	// +optional
	DomainName *string `json:"domainName,omitempty"`
	// DomainNamespace of the libvirt domain.
	// +optional
	DomainNamespace *string `json:"domainNamespace,omitempty"`
	// Node the migration goes to.
	// +optional
	Node string `json:"node,omitempty"`
	// Pod the migration goes to.
	// +optional
	Pod string `json:"pod,omitempty"`
	// SyncAddress is the receiving side's synchronization address.
	// +optional
	SyncAddress *string `json:"syncAddress,omitempty"`
	// PersistentStatePVCName is the claim of the persistent state on the
	// receiving side.
	// +optional
	PersistentStatePVCName string `json:"persistentStatePVCName,omitempty"`
	// SELinuxContext of the receiving launcher.
	// +optional
	SELinuxContext string `json:"selinuxContext,omitempty"`
	// DomainReadyTimestamp is when the receiving domain was ready.
	// +optional
	DomainReadyTimestamp *metav1.Time `json:"domainReadyTimestamp,omitempty"`
	// DomainDetected says the receiving node agent saw the domain.
	// +optional
	DomainDetected bool `json:"domainDetected,omitempty"`
	// NodeAddress is the receiving node's migration address.
	// +optional
	NodeAddress *string `json:"nodeAddress,omitempty"`
	// DirectMigrationNodePorts are the receiving node's migration ports.
	// +optional
	DirectMigrationNodePorts map[string]int `json:"directMigrationNodePorts,omitempty"`
	// AttachmentPodUID of the receiving side's hotplug attachment pod.
	// +optional
	AttachmentPodUID *types.UID `json:"attachmentPodUID,omitempty"`
	// CPUSet of the receiving launcher's dedicated CPUs.
	// +optional
	// +listType=atomic
	CPUSet []int `json:"cpuSet,omitempty"`
	// NodeTopology of the receiving node (JSON).
	// +optional
	NodeTopology *string `json:"nodeTopology,omitempty"`
}
