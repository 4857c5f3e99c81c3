package restapi

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Backend is what the REST API needs of the node agent: the VMIs of its
// node and their launchers, the pod network it wired for them, and where
// to report what a request did. nodeagent.Agent implements it.
type Backend interface {
	// NodeName is the node the agent runs on: the API serves only VMIs
	// whose status.nodeName is this one.
	NodeName() string
	// CachedVMI returns the VMI as the agent's informer cache holds it,
	// which may lag the API server; an error when the cache does not hold
	// it.
	CachedVMI(namespace, name string) (*v1.VirtualMachineInstance, error)
	// FreshVMI reads the VMI from the API server; the error is a NotFound
	// one (apierrors.IsNotFound) when the VMI does not exist. The API asks
	// it when the cached VMI would be refused.
	FreshVMI(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstance, error)
	// Launcher returns the client of the launcher of the VMI with the
	// given UID, which carries out the API's requests.
	Launcher(uid types.UID) *client.Client
	// WiredNetwork returns what the agent wired for the VMI's pod network
	// in the network namespace of its launcher, the process launcherPID
	// (network.Setup's results): port-forward dials a guest with the
	// bridge binding at the pod address the agent took there.
	WiredNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, launcherPID int) ([]network.Result, error)
	// Enqueue has the agent sync the VMI soon, so that its status reports
	// at once what a request changed (pause, unpause).
	Enqueue(vmi *v1.VirtualMachineInstance)
	// Eventf records an event on the VMI, as record.EventRecorder's
	// Eventf does (SoftRebooted, Reset).
	Eventf(vmi *v1.VirtualMachineInstance, eventType, reason, messageFmt string, args ...any)
	// CountLauncherError counts a failed call to a launcher, by operation
	// (pause, unpause, softreboot, reset, freeze, unfreeze, guestagent).
	CountLauncherError(op string)
}
