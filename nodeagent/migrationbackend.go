package nodeagent

import (
	"context"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/livemigration"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The agent's part in live migrations is nodeagent/livemigration's; the
// agent is its Backend (NodeName, Launcher, Eventf and CountLauncherError
// are the REST API's too, restbackend.go): it queues the VMIs of its
// migration target informer for Migrator.SyncTarget, and has
// Migrator.SyncSource drive those this node is the source of (sync.go).

var _ livemigration.Backend = (*Agent)(nil)

// targetKeyPrefix starts the queue key of a VMI this node is the
// migration target of.
const targetKeyPrefix = "migration-target:"

func isTargetKey(key string) bool { return strings.HasPrefix(key, targetKeyPrefix) }

// enqueueTarget queues a VMI of the migration target informer.
func (a *Agent) enqueueTarget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		a.queue.Add(targetKeyPrefix + key)
	}
}

// NoteLauncherPods records the launcher pods on this node that vmi's
// status.activePods lists, from then on the only pods in whose volumes the
// agent looks for the VMI's launcher.
func (a *Agent) NoteLauncherPods(vmi *v1.VirtualMachineInstance) { a.notePods(vmi) }

// PrepareLauncher gives the user of the launcher c of vmi, when it is not
// root, the devices and disks its QEMU opens, as the agent does before a
// domain starts, and mounts the claims of vmi's hotplugged volumes into it.
func (a *Agent) PrepareLauncher(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) error {
	if err := a.prepareLauncher(ctx, vmi, c); err != nil {
		return err
	}
	return a.mountHotpluggedTarget(ctx, vmi, c)
}

// WireNetwork wires vmi's pod network in the network namespace of its
// launcher c, as the agent does before a domain starts, and keeps what it
// wired (see WiredNetwork).
func (a *Agent) WireNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) error {
	_, err := a.wireNetwork(ctx, vmi, c)
	return err
}
