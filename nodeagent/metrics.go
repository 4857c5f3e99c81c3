package nodeagent

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// metrics are the agent's Prometheus metrics, on its own registry.
type metrics struct {
	registry        *prometheus.Registry
	domainState     *prometheus.GaugeVec
	syncDuration    prometheus.Histogram
	launcherErrors  *prometheus.CounterVec
	heartbeat       prometheus.Gauge
	heartbeatErrors prometheus.Counter
	orphanLaunchers prometheus.Counter
	// vmiStats collects KubeVirt's per-VMI metrics at scrape time.
	vmiStats prometheus.Collector

	mu    sync.Mutex
	state map[string]string // VMI key → state label in domainState
}

func newMetrics(vmiStats prometheus.Collector) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		vmiStats: vmiStats,
		domainState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vmkit_nodeagent_vmi_domain_state",
			Help: "1 for the domain state each VMI on this node is in (label state: Running, Paused, Shutoff, Crashed, ...).",
		}, []string{"namespace", "name", "state"}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "vmkit_nodeagent_sync_duration_seconds",
			Help:    "Time to sync one VMI with its launcher, including status writes.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		launcherErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmkit_nodeagent_launcher_errors_total",
			Help: "Failed calls to launchers, by operation.",
		}, []string{"op"}),
		heartbeat: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vmkit_nodeagent_heartbeat_timestamp_seconds",
			Help: "When the node's heartbeat was last written.",
		}),
		heartbeatErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vmkit_nodeagent_heartbeat_errors_total",
			Help: "Failed heartbeat writes.",
		}),
		orphanLaunchers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vmkit_nodeagent_orphan_launchers_total",
			Help: "Running launchers found whose VMI was deleted, final or on another node (while the agent was not watching), each then stopped.",
		}),
		state: map[string]string{},
	}
	_ = m.register(m.registry)
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.domainState, m.syncDuration, m.launcherErrors, m.heartbeat, m.heartbeatErrors, m.orphanLaunchers, m.vmiStats}
}

func (m *metrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range m.collectors() {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}

func (m *metrics) setDomainState(vmi *v1.VirtualMachineInstance, state string) {
	key := vmi.Namespace + "/" + vmi.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.state[key]; ok && old != state {
		m.domainState.DeleteLabelValues(vmi.Namespace, vmi.Name, old)
	}
	m.state[key] = state
	m.domainState.WithLabelValues(vmi.Namespace, vmi.Name, state).Set(1)
}

func (m *metrics) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.state[key]
	if !ok {
		return
	}
	delete(m.state, key)
	ns, name := splitKey(key)
	m.domainState.DeleteLabelValues(ns, name, old)
}

func splitKey(key string) (ns, name string) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// Registry returns the registry holding the agent's metrics, for a
// /metrics handler (promhttp.HandlerFor). Gathering it asks the launchers
// of the node's running VMIs for their domain statistics (see
// Config.StatsTimeout).
func (a *Agent) Registry() *prometheus.Registry { return a.metrics.registry }
