package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are the controller's Prometheus metrics: the workqueue's (by queue
// name) and the controller's own counters.
type Metrics struct {
	depth                   *prometheus.GaugeVec
	adds                    *prometheus.CounterVec
	latency                 *prometheus.HistogramVec
	workDuration            *prometheus.HistogramVec
	unfinishedWork          *prometheus.GaugeVec
	longestRunningProcessor *prometheus.GaugeVec
	retries                 *prometheus.CounterVec

	// APIWrites counts every create, update, patch and delete the
	// controller sends to the API server, by resource and verb.
	APIWrites *prometheus.CounterVec
	// Steps counts rollout steps taken, by kind.
	Steps *prometheus.CounterVec
	// GateWaiting is 1 for the gate check each cluster waits for.
	GateWaiting *prometheus.GaugeVec
}

var (
	registerOnce sync.Once
	defaultM     *Metrics
)

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(1e-6, 10, 10)
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current depth of the workqueue.",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Total number of adds handled by the workqueue.",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "How long an item stays in the workqueue before being requested.", Buckets: buckets,
		}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "How long processing an item from the workqueue takes.", Buckets: buckets,
		}, []string{"name"}),
		unfinishedWork: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration.",
		}, []string{"name"}),
		longestRunningProcessor: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running processor has been running.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Total number of retries handled by the workqueue.",
		}, []string{"name"}),
		APIWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nats_operator_api_writes_total", Help: "Writes the controller sent to the Kubernetes API, by resource and verb.",
		}, []string{"resource", "verb"}),
		Steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nats_operator_rollout_steps_total", Help: "Rollout steps the controller took, by kind.",
		}, []string{"kind"}),
		GateWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nats_operator_gate_waiting", Help: "1 for the gate check a NatsCluster's next step waits for.",
		}, []string{"namespace", "name", "waiting_for"}),
	}
	reg.MustRegister(m.depth, m.adds, m.latency, m.workDuration, m.unfinishedWork,
		m.longestRunningProcessor, m.retries, m.APIWrites, m.Steps, m.GateWaiting)
	return m
}

// RegisterWorkqueueMetrics makes m the provider of every named workqueue's
// metrics. client-go accepts one provider per process; later calls are no-ops.
func RegisterWorkqueueMetrics(m *Metrics) {
	registerOnce.Do(func() {
		defaultM = m
		workqueue.SetProvider(provider{m})
	})
}

type provider struct{ m *Metrics }

func (p provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.m.depth.WithLabelValues(name)
}
func (p provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.m.adds.WithLabelValues(name)
}
func (p provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.m.latency.WithLabelValues(name)
}
func (p provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.m.workDuration.WithLabelValues(name)
}
func (p provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.unfinishedWork.WithLabelValues(name)
}
func (p provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.longestRunningProcessor.WithLabelValues(name)
}
func (p provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.m.retries.WithLabelValues(name)
}
