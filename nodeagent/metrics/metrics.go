// Package metrics holds the node agent's (virt-handler's) Prometheus
// metrics, on a registry of their own: its counters (syncs, failed
// launcher calls, heartbeats, orphan launchers), each VMI's domain state,
// and KubeVirt's per-VMI metrics (kubevirt_vmi_memory_*,
// kubevirt_vmi_vcpu_*, kubevirt_vmi_network_*, kubevirt_vmi_storage_*, ...)
// with vmkit_nodeagent_vmi_paused, collected at scrape time from the
// launchers of the node's running VMIs. docs/metrics.md lists them all.
//
// The agent reports what it did through the methods of Metrics and is the
// Source the per-VMI collector reads; nodeagent.Agent implements it.
package metrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Metrics are the node agent's Prometheus metrics, on their own registry.
// Create them with New.
type Metrics struct {
	registry        *prometheus.Registry
	domainState     *prometheus.GaugeVec
	syncDuration    prometheus.Histogram
	launcherErrors  *prometheus.CounterVec
	heartbeat       prometheus.Gauge
	heartbeatErrors prometheus.Counter
	orphanLaunchers prometheus.Counter
	// vmiStats collects KubeVirt's per-VMI metrics at scrape time.
	vmiStats *vmiStatsCollector

	mu    sync.Mutex
	state map[string]string // VMI key → state label in domainState
}

// New returns the agent's metrics, registered on their Registry. Gathering
// them asks src's launchers for the domain statistics of its running VMIs,
// waiting at most statsTimeout (DefaultStatsTimeout when not positive).
func New(src Source, statsTimeout time.Duration) *Metrics {
	if statsTimeout <= 0 {
		statsTimeout = DefaultStatsTimeout
	}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
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
	m.vmiStats = newVMIStatsCollector(src, statsTimeout, m.launcherErrors)
	_ = m.Register(m.registry)
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.domainState, m.syncDuration, m.launcherErrors, m.heartbeat, m.heartbeatErrors, m.orphanLaunchers, m.vmiStats}
}

// Registry returns the registry holding the metrics, for a /metrics
// handler (promhttp.HandlerFor).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Register registers the metrics on r too (a process's default registry,
// say); the error joins those of the collectors r refused.
func (m *Metrics) Register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range m.collectors() {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}

// SetDomainState records the state the domain of vmi is in
// (vmkit_nodeagent_vmi_domain_state), replacing the one recorded before.
func (m *Metrics) SetDomainState(vmi *v1.VirtualMachineInstance, state string) {
	key := vmi.Namespace + "/" + vmi.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.state[key]; ok && old != state {
		m.domainState.DeleteLabelValues(vmi.Namespace, vmi.Name, old)
	}
	m.state[key] = state
	m.domainState.WithLabelValues(vmi.Namespace, vmi.Name, state).Set(1)
}

// Forget drops the domain state recorded for the VMI namespace/name key,
// whose launcher is gone.
func (m *Metrics) Forget(key string) {
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

// ObserveSync records how long one sync of a VMI took
// (vmkit_nodeagent_sync_duration_seconds).
func (m *Metrics) ObserveSync(d time.Duration) { m.syncDuration.Observe(d.Seconds()) }

// CountLauncherError counts a failed call to a launcher, by operation
// (vmkit_nodeagent_launcher_errors_total{op}).
func (m *Metrics) CountLauncherError(op string) { m.launcherErrors.WithLabelValues(op).Inc() }

// HeartbeatWritten records that the node's heartbeat was written now
// (vmkit_nodeagent_heartbeat_timestamp_seconds).
func (m *Metrics) HeartbeatWritten() { m.heartbeat.SetToCurrentTime() }

// HeartbeatFailed counts a failed heartbeat write
// (vmkit_nodeagent_heartbeat_errors_total).
func (m *Metrics) HeartbeatFailed() { m.heartbeatErrors.Inc() }

// OrphanLauncherFound counts a running launcher whose VMI was deleted,
// became final or left the node while the agent was not watching, which
// the agent then stops (vmkit_nodeagent_orphan_launchers_total).
func (m *Metrics) OrphanLauncherFound() { m.orphanLaunchers.Inc() }
