package livemigration

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Backend is what live migration needs of the node agent: the launchers of
// its node's VMIs, readying a target launcher as it readies any launcher
// before its domain starts, and where to report. nodeagent.Agent
// implements it.
type Backend interface {
	// NodeName is the node the agent runs on: the source or the target
	// of the migrations it takes part in.
	NodeName() string
	// Launcher returns the client of the launcher of the VMI with the
	// given UID.
	Launcher(uid types.UID) *client.Client
	// NoteLauncherPods records the launcher pods on this node that vmi's
	// status.activePods lists, from then on the only pods in whose volumes
	// Launcher looks for the VMI's launcher: the target pod, once the
	// migration controller lists it.
	NoteLauncherPods(vmi *v1.VirtualMachineInstance)
	// PrepareLauncher gives the user of the launcher c (a non-root
	// launcher's) the devices and disks its QEMU opens for vmi, and the
	// launcher the claims of vmi's hotplugged volumes, which the incoming
	// QEMU opens where the source's has them.
	PrepareLauncher(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) error
	// WireNetwork wires vmi's pod network in the network namespace of the
	// launcher c, as for a launcher whose domain starts here.
	WireNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) error
	// Eventf records an event on the VMI, as record.EventRecorder's
	// Eventf does (PreparingTarget, Migrating, Migrated).
	Eventf(vmi *v1.VirtualMachineInstance, eventType, reason, messageFmt string, args ...any)
	// CountLauncherError counts a failed call to a launcher, by operation
	// (prepare).
	CountLauncherError(op string)
}

// Options wire a Migrator to the API server and its node agent.
type Options struct {
	// Config lets the node take part in live migrations as source and
	// target; without it the Migrator leaves migrations alone.
	Config *Config
	// Client writes VMIs (status.migrationState, labels) and reads
	// VirtualMachineInstanceMigrations; Kube lists the node agents' pods
	// (Config.HandlerNamespace).
	Client versioned.Interface
	Kube   kubernetes.Interface
	// Targets lists the VMIs this node is the migration target of (label
	// kubevirt.io/migrationTargetNodeName=<node>), from the agent's
	// informer.
	Targets listers.VirtualMachineInstanceLister
	// PollInterval is how soon a VMI with a migration under way is looked
	// at again (default 1s).
	PollInterval time.Duration
	// Now is the Migrator's clock (default time.Now).
	Now func() time.Time
}
