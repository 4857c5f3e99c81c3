package nodeagent

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/internal/procfs"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	"github.com/vmkit/vmkit/nodeagent/restapi"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The agent's REST API is nodeagent/restapi's; the agent is its Backend:
// the VMIs of its node from its informer (or the API server), their
// launchers, the pod networks it wired, its events and metrics.

var _ restapi.Backend = (*Agent)(nil)

// Handler serves the agent's REST API: console, VNC, pause, unpause, soft
// reboot, reset, freeze, unfreeze, port-forward and the guest agent's
// reports for the VMIs on its node (see nodeagent/restapi).
func (a *Agent) Handler() http.Handler { return restapi.Handler(a) }

// NodeName is the Node the agent runs on (Config.NodeName).
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// CachedVMI returns the VMI namespace/name from the agent's informer cache.
func (a *Agent) CachedVMI(namespace, name string) (*v1.VirtualMachineInstance, error) {
	return a.lister.VirtualMachineInstances(namespace).Get(name)
}

// FreshVMI reads the VMI namespace/name from the API server.
func (a *Agent) FreshVMI(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstance, error) {
	return a.cfg.Client.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
}

// Launcher returns the client of the launcher of the VMI with the given
// UID, which finds the launcher's socket each time it connects.
func (a *Agent) Launcher(uid types.UID) *client.Client { return a.client(uid) }

// WiredNetwork is what the agent wired for vmi's pod network in the
// network namespace of its launcher, the process launcherPID: from memory,
// else read back by network.Setup, which changes nothing in a namespace it
// wired before (an agent restarted since).
func (a *Agent) WiredNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, launcherPID int) ([]network.Result, error) {
	if r := a.networkOf(vmi.UID); r != nil {
		return r, nil
	}
	plan, err := network.Plan(vmi)
	if err != nil {
		return nil, fmt.Errorf("the pod network of %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	ns := "/proc/" + strconv.Itoa(launcherPID) + "/ns/net"
	uid, gid, err := procfs.User(launcherPID)
	if err != nil {
		return nil, fmt.Errorf("the launcher's user: %w", err)
	}
	results, err := network.Setup(ns, plan, network.Options{TapOwner: uid, TapGroup: gid})
	if err != nil {
		return nil, fmt.Errorf("reading the wiring of %s/%s's pod network: %w", vmi.Namespace, vmi.Name, err)
	}
	a.mu.Lock()
	a.networks[vmi.UID] = results
	a.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("read back the pod network's wiring", "vmi", vmi.Namespace+"/"+vmi.Name)
	return results, nil
}

// Enqueue has the agent sync the VMI soon.
func (a *Agent) Enqueue(vmi *v1.VirtualMachineInstance) {
	key, _ := cache.MetaNamespaceKeyFunc(vmi)
	a.queue.Add(key)
}

// Eventf records an event on the VMI with the agent's recorder.
func (a *Agent) Eventf(vmi *v1.VirtualMachineInstance, eventType, reason, messageFmt string, args ...any) {
	a.recorder.Eventf(vmi, eventType, reason, messageFmt, args...)
}

// CountLauncherError counts a failed call to a launcher in the agent's
// metric vmkit_nodeagent_launcher_errors_total, by operation.
func (a *Agent) CountLauncherError(op string) { a.metrics.CountLauncherError(op) }
