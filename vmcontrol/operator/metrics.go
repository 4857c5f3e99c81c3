package operator

import "github.com/prometheus/client_golang/prometheus"

// Metrics are virt-operator's metrics with KubeVirt's names, for the
// operator's /metrics (cmd/virt-operator registers them): KubeVirt's
// alerts NoLeadingVirtOperator and NoReadyVirtOperator read them.
type Metrics struct {
	// Leading is kubevirt_virt_operator_leading_status: 1 while this
	// process holds the leader Lease and runs the controller.
	Leading prometheus.Gauge
	// Ready is kubevirt_virt_operator_ready_status: 1 while this process
	// is ready (what its /readyz answers).
	Ready prometheus.Gauge
}

// NewMetrics returns the operator's metrics, all 0.
func NewMetrics() *Metrics {
	return &Metrics{
		Leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubevirt_virt_operator_leading_status",
			Help: "Indication for an operating virt-operator.",
		}),
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubevirt_virt_operator_ready_status",
			Help: "Indication for a virt-operator that is ready to take the lead.",
		}),
	}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Leading, m.Ready} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
