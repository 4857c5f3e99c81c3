package nodeagent

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vmkit/vmkit/nodeagent/metrics"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The agent's metrics are nodeagent/metrics'; the agent is their Source
// (NodeName and Launcher are the REST API's too, restbackend.go): a scrape
// asks the launchers of the running VMIs in its cache for their domains'
// statistics.

var _ metrics.Source = (*Agent)(nil)

// Registry returns the registry holding the agent's metrics, for a
// /metrics handler (promhttp.HandlerFor). Gathering it asks the launchers
// of the node's running VMIs for their domain statistics (see
// Config.StatsTimeout).
func (a *Agent) Registry() *prometheus.Registry { return a.metrics.Registry() }

// CachedVMIs lists the VMIs in the agent's informer cache: those labelled
// for its node.
func (a *Agent) CachedVMIs() ([]*v1.VirtualMachineInstance, error) {
	return a.lister.List(labels.Everything())
}
