package vmcontrol

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/util/workqueue"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// PhaseTransitionTimeBuckets are KubeVirt's buckets (seconds) for the
// kubevirt_vmi_phase_transition_time_from_creation_seconds histogram.
var PhaseTransitionTimeBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600}

// metrics are the Manager's Prometheus metrics, in its own registry.
type metrics struct {
	registry         *prometheus.Registry
	reconciles       *prometheus.CounterVec
	reconcileSeconds *prometheus.HistogramVec
	phaseFromCreate  *prometheus.HistogramVec
	startPhase       *prometheus.HistogramVec
	leading          prometheus.Gauge
	ready            prometheus.GaugeFunc
	vmis             *vmiCollector
}

// newMetrics registers the Manager's metrics; ready reports whether the
// Manager is ready (what /readyz answers).
func newMetrics(ready func() bool) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmkit_controller_reconcile_total",
			Help: "Reconciliations per controller and result (success, requeue, error).",
		}, []string{"controller", "result"}),
		reconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vmkit_controller_reconcile_duration_seconds",
			Help:    "Time one reconciliation takes, per controller.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"controller"}),
		phaseFromCreate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubevirt_vmi_phase_transition_time_from_creation_seconds",
			Help:    "Histogram of VM phase transitions duration from creation time in seconds.",
			Buckets: PhaseTransitionTimeBuckets,
		}, []string{"phase"}),
		startPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vmkit_vmi_start_phase_duration_seconds",
			Help:    "Time each phase of a VMI's first start took, from the end of the phase before (the VMI's vmkit.io/start-timeline annotation).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}, []string{"phase"}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubevirt_virt_controller_leading_status",
			Help: "Indication for an operating virt-controller.",
		}),
		ready: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kubevirt_virt_controller_ready_status",
			Help: "Indication for a virt-controller that is ready to take the lead.",
		}, func() float64 {
			if ready() {
				return 1
			}
			return 0
		}),
		vmis: newVMICollector(),
	}
	m.registry.MustRegister(m.reconciles, m.reconcileSeconds, m.phaseFromCreate, m.startPhase, m.leading, m.ready, m.vmis,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerWorkqueueMetrics(m.registry)
	return m
}

// observer returns the per-sync hook of one controller.
func (m *metrics) observer(controller string) func(string, time.Duration, error) {
	return func(_ string, d time.Duration, err error) {
		result := "success"
		switch {
		case reconcile.IsRequeue(err):
			result = "requeue"
		case err != nil:
			result = "error"
		}
		m.reconciles.WithLabelValues(controller, result).Inc()
		m.reconcileSeconds.WithLabelValues(controller).Observe(d.Seconds())
	}
}

// phaseChanged records the time from a VMI's creation to entering phase.
func (m *metrics) phaseChanged(vmi *v1.VirtualMachineInstance, phase v1.VirtualMachineInstancePhase) {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == phase {
			d := t.PhaseTransitionTimestamp.Sub(vmi.CreationTimestamp.Time).Seconds()
			m.phaseFromCreate.WithLabelValues(string(phase)).Observe(max(d, 0))
			return
		}
	}
}

// startTimeline records how long each phase of a VMI's start took.
func (m *metrics) startTimeline(_ *v1.VirtualMachineInstance, t v1.StartTimeline) {
	for i := 1; i < len(t); i++ {
		m.startPhase.WithLabelValues(t[i].Phase).Observe(t.Duration(i).Seconds())
	}
}

// Workqueue metrics: client-go accepts one provider per process, whose
// metrics are process-wide; every Manager's registry serves them (a process
// may run several Managers one after another, as the tests do).
var workqueueOnce sync.Once

func registerWorkqueueMetrics(reg *prometheus.Registry) {
	workqueueOnce.Do(func() { workqueue.SetProvider(workqueueProvider{}) })
	reg.MustRegister(wqDepth, wqAdds, wqLatency, wqWork, wqRetries)
}

type workqueueProvider struct{}

var (
	wqDepth   = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth", Help: "Current depth of the workqueue."}, []string{"name"})
	wqAdds    = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total", Help: "Total adds to the workqueue."}, []string{"name"})
	wqLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds", Help: "Seconds an item waits in the workqueue.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"})
	wqWork    = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds", Help: "Seconds processing an item takes.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"})
	wqRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total", Help: "Total retries in the workqueue."}, []string{"name"})
)

func (workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return wqDepth.WithLabelValues(name)
}

func (workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return wqAdds.WithLabelValues(name)
}

func (workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return wqLatency.WithLabelValues(name)
}

func (workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return wqWork.WithLabelValues(name)
}

func (workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return noopGauge{}
}

func (workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return noopGauge{}
}

func (workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return wqRetries.WithLabelValues(name)
}

type noopGauge struct{}

func (noopGauge) Set(float64) {}
