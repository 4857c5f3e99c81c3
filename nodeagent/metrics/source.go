package metrics

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Source is what the per-VMI metrics read of the node agent when
// Prometheus scrapes it: the VMIs of its node and their launchers.
// nodeagent.Agent implements it.
type Source interface {
	// NodeName is the node the agent runs on: only the VMIs running on
	// this one are scraped.
	NodeName() string
	// CachedVMIs lists the VMIs in the agent's informer cache (those
	// labelled for its node).
	CachedVMIs() ([]*v1.VirtualMachineInstance, error)
	// Launcher returns the client of the launcher of the VMI with the
	// given UID, which is asked for the domain's statistics.
	Launcher(uid types.UID) *client.Client
}
