package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// Metrics are the controller's Prometheus metrics: the workqueue's (by queue
// name) and the controller's own.
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
	// GateToStep observes, by step kind, the seconds from the last sync
	// that found a cluster's gate closed to the step that followed once it
	// opened (stepTaken says which steps count).
	GateToStep *prometheus.HistogramVec
	// StepDuration observes how long executing one step took, by kind.
	StepDuration *prometheus.HistogramVec
	// ServersPending is the number of servers each cluster's rollout still
	// has to step (status.rollout.pending).
	ServersPending *prometheus.GaugeVec

	// gateClosedAt is, per NatsCluster, the planning time of the last sync
	// that found its gate closed, while no step or other decision followed.
	// It is kept in memory only, for GateToStep: a controller that restarts
	// (or takes over the lease) has none and observes nothing for the first
	// step it takes. No decision reads it.
	mu           sync.Mutex
	gateClosedAt map[cache.ObjectName]time.Time
}

// stepKinds are the step kinds the planner has: their histograms exist
// (empty) before the first step.
var stepKinds = rollout.StepKinds

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
		GateToStep: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nats_operator_gate_to_step_seconds",
			Help: "Seconds from the last sync that found a NatsCluster's gate closed to the start of the step it then let through, by kind: " +
				"an upper bound of how long the controller took to act once the gate opened. Steps not preceded by a wait at the gate, " +
				"forced or through a closed gate, and the first step after a controller restart (the time is kept in memory) are not observed.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300},
		}, []string{"kind"}),
		StepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nats_operator_step_duration_seconds",
			Help:    "Seconds executing one rollout step took (its writes and NATS requests), by kind.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"kind"}),
		ServersPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nats_operator_servers_pending",
			Help: "Servers a NatsCluster's rollout still has to step (status.rollout.pending); 0 when none.",
		}, []string{"namespace", "name"}),
		gateClosedAt: map[cache.ObjectName]time.Time{},
	}
	for _, k := range stepKinds {
		m.GateToStep.WithLabelValues(string(k))
		m.StepDuration.WithLabelValues(string(k))
	}
	reg.MustRegister(m.depth, m.adds, m.latency, m.workDuration, m.unfinishedWork,
		m.longestRunningProcessor, m.retries, m.APIWrites, m.Steps, m.GateWaiting,
		m.GateToStep, m.StepDuration, m.ServersPending)
	return m
}

// recordDecision sets a NatsCluster's gauges from its sync's decision: the
// gate check it waits for and the servers pending. now is the time the sync
// planned at (the planner input's Now): a sync that waits at the gate
// remembers it for GateToStep; one that neither waits nor steps forgets it.
// A step's decision, written once taken with the gate it waits at next,
// changes neither.
func (m *Metrics) recordDecision(key cache.ObjectName, d rollout.Decision, now time.Time) {
	cluster := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	m.GateWaiting.DeletePartialMatch(cluster)
	waitingFor, pending := "", 0
	if r := d.Rollout; r != nil {
		pending = len(r.Pending)
		if r.Gate != nil {
			waitingFor = r.Gate.WaitingFor
		}
	}
	m.ServersPending.With(cluster).Set(float64(pending))
	if waitingFor != "" {
		m.GateWaiting.WithLabelValues(key.Namespace, key.Name, waitingFor).Set(1)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case d.Step != nil:
		// A step taken waits at the gate from now (its status once
		// taken, rollout.Taken), but the time to the next step counts
		// from the last look that finds that gate closed.
	case waitingFor != "":
		m.gateClosedAt[key] = now
	default:
		delete(m.gateClosedAt, key)
	}
}

// gateLookedClosed remembers a look within a sync that found a
// NatsCluster's gate closed (lookAgainAtOnce), as a sync that waits does.
func (m *Metrics) gateLookedClosed(key cache.ObjectName, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gateClosedAt[key] = at
}

// stepTaken counts a step executed for a NatsCluster from start to end and
// observes its duration. When the cluster's last sync waited at the gate,
// and the gate let the step through (not force-step, not a server that is
// down, not restart-all, which go through a closed gate or none), it
// observes the time from that sync to start in GateToStep.
func (m *Metrics) stepTaken(key cache.ObjectName, step *rollout.Step, start, end time.Time) {
	kind := string(step.Kind)
	m.Steps.WithLabelValues(kind).Inc()
	m.StepDuration.WithLabelValues(kind).Observe(end.Sub(start).Seconds())
	m.mu.Lock()
	defer m.mu.Unlock()
	closedAt, waited := m.gateClosedAt[key]
	delete(m.gateClosedAt, key)
	if waited && !step.Forced && !step.Down && step.Kind != rollout.RestartAll {
		m.GateToStep.WithLabelValues(kind).Observe(start.Sub(closedAt).Seconds())
	}
}

// forget drops the series of a NatsCluster that is gone, and what is
// remembered of it.
func (m *Metrics) forget(key cache.ObjectName) {
	cluster := map[string]string{"namespace": key.Namespace, "name": key.Name}
	m.GateWaiting.DeletePartialMatch(cluster)
	m.ServersPending.DeletePartialMatch(cluster)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.gateClosedAt, key)
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
