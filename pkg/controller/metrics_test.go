package controller

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// The metrics a controller keeps across syncs need one controller synced
// again and again: liveController is the fixture's controller built once,
// its NatsCluster put back in the cache (at a new resourceVersion) with the
// status each sync wrote, as the informer would.
type liveController struct {
	t    *testing.T
	c    *Controller
	reg  *prometheus.Registry
	m    *Metrics
	inf  Informers
	kube *k8sfake.Clientset
	nats *natsfake.Clientset
	rv   int
}

// live builds the fixture's controller once; the fixture's kube objects are
// the cache's for every sync.
func (f *fixture) live() *liveController {
	f.t.Helper()
	ctx := context.Background()
	kube := k8sfake.NewClientset(f.kubeObjects...)
	nats := natsfake.NewSimpleClientset(append([]runtime.Object{f.nc}, f.natsObjects...)...)
	ki := kubeinformers.NewSharedInformerFactory(kube, 0)
	ni := natsinformers.NewSharedInformerFactory(nats, 0)
	inf := testInformers(ki, ni)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	c := New(ctx, Options{KubeClient: kube, NatsClient: nats, Informers: inf, Metrics: m})
	c.recorder = record.NewFakeRecorder(1000)
	must := func(err error) {
		if err != nil {
			f.t.Fatal(err)
		}
	}
	must(addToCaches(inf, f.kubeObjects))
	return &liveController{t: f.t, c: c, reg: reg, m: m, inf: inf, kube: kube, nats: nats}
}

// sync puts nc in the cache at a new resourceVersion and syncs it with snap
// observed. It returns the NatsCluster as the cache holds it next (with the
// status the sync wrote) and the sync's writes.
func (l *liveController) sync(nc *clusterv1beta1.NatsCluster, snap *observe.Snapshot) (*clusterv1beta1.NatsCluster, []core.Action) {
	l.t.Helper()
	l.c.observer = fakeObserver{snap}
	return l.syncObserved(nc)
}

// syncObserved is sync with the controller's observer as it is.
func (l *liveController) syncObserved(nc *clusterv1beta1.NatsCluster) (*clusterv1beta1.NatsCluster, []core.Action) {
	l.t.Helper()
	l.rv++
	nc = nc.DeepCopy()
	nc.ResourceVersion = strconv.Itoa(l.rv)
	if err := l.inf.Clusters.Informer().GetIndexer().Add(nc); err != nil {
		l.t.Fatal(err)
	}
	l.kube.ClearActions()
	l.nats.ClearActions()
	if _, err := l.c.sync(context.Background(), cache.MetaObjectToName(nc)); err != nil {
		l.t.Fatalf("sync: %v", err)
	}
	acts := writes(append(l.kube.Actions(), l.nats.Actions()...))
	if st := writtenStatus(acts); st != nil {
		nc = st
	}
	return nc, acts
}

// gone removes nc from the cache and syncs it: the NatsCluster was deleted.
func (l *liveController) gone(nc *clusterv1beta1.NatsCluster) {
	l.t.Helper()
	if err := l.inf.Clusters.Informer().GetIndexer().Delete(nc); err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.c.sync(context.Background(), cache.MetaObjectToName(nc)); err != nil {
		l.t.Fatalf("sync: %v", err)
	}
}

// histogram is the sample count and sum of the series of histogram name
// with label kind, as the registry exposes them; ok is false without one.
func histogram(t *testing.T, reg prometheus.Gatherer, name, kind string) (count uint64, sum float64, ok bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name || mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "kind" && lp.GetValue() == kind {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), true
				}
			}
		}
	}
	return 0, 0, false
}

// assertNoGateToStep checks that no step kind has a gate-to-step sample.
func assertNoGateToStep(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	for _, k := range stepKinds {
		if n, _, _ := histogram(t, reg, "nats_operator_gate_to_step_seconds", string(k)); n != 0 {
			t.Errorf("nats_operator_gate_to_step_seconds{kind=%q} has %d samples, want none", k, n)
		}
	}
}

// versionChange is a 3-server cluster running 2.15.1 with its system user,
// whose spec asks for 2.15.2: a rolling restart, demo-2 first. snap is the
// cluster observed on its running revisions, settled unless told.
func versionChange(t *testing.T) (f *fixture, outOld *render.Output, snap func(settled bool) *observe.Snapshot) {
	t.Helper()
	old := rt.NewCluster("ns", "demo", rt.Version("2.15.1"))
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld = withSystemUser(t, old, secret)
	nc := rt.NewCluster("ns", "demo", rt.Version("2.15.2"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	f = newFixture(t, nc, append(running(t, outOld), secret)...)
	return f, outOld, func(isSettled bool) *observe.Snapshot {
		s := reportingOwn(outOld)
		if !isSettled {
			s.Verdict = observe.Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonGroupsLeaderless, Message: "stream ORDERS has no leader"}
		}
		return s
	}
}

// A rolling restart that waits at the gate (Settled) and steps once it
// opens: while it waits, gate_waiting names the check and servers_pending
// counts the three servers; the step is counted in step_duration and, as it
// followed a wait, in gate_to_step, with the time from the waiting sync (a
// few milliseconds here, well under a second); then one server is stepped
// and two are pending, and the gate the step waits at once taken is
// TargetRevision (the wait it remembers for gate_to_step starts only at the
// next sync that finds it closed). Once the NatsCluster is gone, its series go too.
func TestMetricsOfARolloutThatWaitsAtTheGate(t *testing.T) {
	f, _, snap := versionChange(t)
	l := f.live()
	key := cache.MetaObjectToName(f.nc)

	nc, acts := l.sync(f.nc, snap(false))
	assertActions(t, acts, "update natsclusters/status demo")
	if nc.Status.Rollout == nil || nc.Status.Rollout.Gate == nil || nc.Status.Rollout.Gate.WaitingFor != clusterv1beta1.GateSettled {
		t.Fatalf("status.rollout %+v, want waiting for Settled", nc.Status.Rollout)
	}
	if v := testutil.ToFloat64(l.m.GateWaiting.WithLabelValues("ns", "demo", clusterv1beta1.GateSettled)); v != 1 {
		t.Errorf("nats_operator_gate_waiting{waiting_for=Settled} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(l.m.ServersPending.WithLabelValues("ns", "demo")); v != 3 {
		t.Errorf("nats_operator_servers_pending while waiting = %v, want 3", v)
	}
	if n, _, ok := histogram(t, l.reg, "nats_operator_step_duration_seconds", string(rollout.RestartOne)); !ok || n != 0 {
		t.Errorf("nats_operator_step_duration_seconds{kind=RestartOne}: %d samples (exposed %v), want an empty series", n, ok)
	}
	assertNoGateToStep(t, l.reg)

	// A second sync still waiting: the last waiting sync is the one that counts.
	nc, _ = l.sync(nc, snap(false))
	lastWait := l.m.gateClosedAt[key]
	if lastWait.IsZero() {
		t.Fatal("no waiting sync remembered")
	}

	nc, acts = l.sync(nc, snap(true))
	assertActions(t, acts,
		"update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0",
		"update natsclusters/status demo")
	if v := testutil.ToFloat64(l.m.Steps.WithLabelValues(string(rollout.RestartOne))); v != 1 {
		t.Errorf("nats_operator_rollout_steps_total{kind=RestartOne} = %v, want 1", v)
	}
	n, sum, _ := histogram(t, l.reg, "nats_operator_step_duration_seconds", string(rollout.RestartOne))
	if n != 1 || sum <= 0 || sum > 5 {
		t.Errorf("nats_operator_step_duration_seconds{kind=RestartOne}: %d samples, sum %vs; want 1 of under 5s", n, sum)
	}
	n, sum, _ = histogram(t, l.reg, "nats_operator_gate_to_step_seconds", string(rollout.RestartOne))
	if elapsed := time.Since(lastWait).Seconds(); n != 1 || sum <= 0 || sum > elapsed {
		t.Errorf("nats_operator_gate_to_step_seconds{kind=RestartOne}: %d samples, sum %vs; want 1 of more than 0 and at most the %vs since the last waiting sync", n, sum, elapsed)
	}
	t.Logf("gate_to_step %.6fs, step_duration of RestartOne observed", sum)
	if v := testutil.ToFloat64(l.m.ServersPending.WithLabelValues("ns", "demo")); v != 2 {
		t.Errorf("nats_operator_servers_pending after stepping demo-2 = %v, want 2", v)
	}
	// The step's status once taken waits for demo-2 to run the target.
	if n := testutil.CollectAndCount(l.m.GateWaiting); n != 1 {
		t.Errorf("nats_operator_gate_waiting has %d series after the step, want 1", n)
	}
	if v := testutil.ToFloat64(l.m.GateWaiting.WithLabelValues("ns", "demo", clusterv1beta1.GateTargetRevision)); v != 1 {
		t.Errorf("nats_operator_gate_waiting{waiting_for=TargetRevision} after the step = %v, want 1", v)
	}
	if _, ok := l.m.gateClosedAt[key]; ok {
		t.Error("the wait is still remembered after the step")
	}

	// Waiting for demo-2 to come back, then the NatsCluster is deleted.
	l.sync(nc, snap(false))
	if _, ok := l.m.gateClosedAt[key]; !ok {
		t.Error("the wait for demo-2 is not remembered")
	}
	l.gone(nc)
	if n := testutil.CollectAndCount(l.m.ServersPending); n != 0 {
		t.Errorf("nats_operator_servers_pending has %d series after the NatsCluster is gone, want none", n)
	}
	if n := testutil.CollectAndCount(l.m.GateWaiting); n != 0 {
		t.Errorf("nats_operator_gate_waiting has %d series after the NatsCluster is gone, want none", n)
	}
	if _, ok := l.m.gateClosedAt[key]; ok {
		t.Error("the wait is still remembered after the NatsCluster is gone")
	}
	// The step histograms are by kind only: they stay.
	if n, _, _ := histogram(t, l.reg, "nats_operator_gate_to_step_seconds", string(rollout.RestartOne)); n != 1 {
		t.Errorf("nats_operator_gate_to_step_seconds{kind=RestartOne} has %d samples after the deletion, want 1", n)
	}
}

// A step whose gate was open at once did not wait: its duration is
// observed, no gate-to-step time is.
func TestMetricsOfAStepThatDidNotWait(t *testing.T) {
	f, _, snap := versionChange(t)
	l := f.live()
	_, acts := l.sync(f.nc, snap(true))
	assertActions(t, acts,
		"update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0",
		"update natsclusters/status demo")
	if n, _, _ := histogram(t, l.reg, "nats_operator_step_duration_seconds", string(rollout.RestartOne)); n != 1 {
		t.Errorf("nats_operator_step_duration_seconds{kind=RestartOne} has %d samples, want 1", n)
	}
	assertNoGateToStep(t, l.reg)
	if v := testutil.ToFloat64(l.m.ServersPending.WithLabelValues("ns", "demo")); v != 2 {
		t.Errorf("nats_operator_servers_pending = %v, want 2", v)
	}
}

// A wait at the gate, then a sync that neither waits nor steps (the rollout
// is paused while the gate is open), then the step once unpaused: the step
// did not follow a wait at the gate, and no gate-to-step time is observed.
func TestMetricsForgetAWaitThatAHoldEnded(t *testing.T) {
	f, _, snap := versionChange(t)
	l := f.live()
	nc, _ := l.sync(f.nc, snap(false))
	nc.Spec.Rollout.Paused = true
	nc, _ = l.sync(nc, snap(true))
	if p := conditionIn(nc, clusterv1beta1.ConditionProgressing); p.Reason != clusterv1beta1.ReasonRolloutPaused {
		t.Fatalf("Progressing %s, want RolloutPaused", p.Reason)
	}
	if v := testutil.ToFloat64(l.m.ServersPending.WithLabelValues("ns", "demo")); v != 3 {
		t.Errorf("nats_operator_servers_pending while paused = %v, want 3", v)
	}
	nc.Spec.Rollout.Paused = false
	_, acts := l.sync(nc, snap(true))
	assertActions(t, acts,
		"update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0",
		"update natsclusters/status demo")
	if n, _, _ := histogram(t, l.reg, "nats_operator_step_duration_seconds", string(rollout.RestartOne)); n != 1 {
		t.Errorf("nats_operator_step_duration_seconds{kind=RestartOne} has %d samples, want 1", n)
	}
	assertNoGateToStep(t, l.reg)
}

// The metrics' own bookkeeping, with times given: the last of several
// waiting syncs counts; a step through a closed gate or after none
// observes no gate-to-step time; a controller that never saw the wait (it
// restarted) observes none.
func TestMetricsGateToStepTimes(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	demo := cache.ObjectName{Namespace: "ns", Name: "demo"}
	wait := rollout.Decision{Rollout: &clusterv1beta1.RolloutStatus{
		Pending: []string{"demo-1", "demo-0"}, Gate: &clusterv1beta1.Gate{WaitingFor: clusterv1beta1.GatePodsReady},
	}}
	restart := &rollout.Step{Kind: rollout.RestartOne, Servers: []string{"demo-1"}}
	for _, tt := range []struct {
		name    string
		run     func(m *Metrics)
		samples uint64
		sum     float64
	}{
		{"a step after two waiting syncs counts from the last", func(m *Metrics) {
			m.recordDecision(demo, wait, at(0))
			m.recordDecision(demo, wait, at(1))
			m.stepTaken(demo, restart, at(1.75), at(2))
		}, 1, 0.75},
		{"a second step without a wait in between is not observed", func(m *Metrics) {
			m.recordDecision(demo, wait, at(0))
			m.stepTaken(demo, restart, at(0.5), at(0.6))
			m.stepTaken(demo, restart, at(3), at(3.1))
		}, 1, 0.5},
		{"a forced step through the closed gate is not observed", func(m *Metrics) {
			m.recordDecision(demo, wait, at(0))
			m.stepTaken(demo, &rollout.Step{Kind: rollout.RestartOne, Servers: []string{"demo-1"}, Forced: true}, at(1), at(1.1))
		}, 0, 0},
		{"a step restarting a server that is down is not observed", func(m *Metrics) {
			m.recordDecision(demo, wait, at(0))
			m.stepTaken(demo, &rollout.Step{Kind: rollout.RestartOne, Servers: []string{"demo-1"}, Down: true}, at(1), at(1.1))
		}, 0, 0},
		{"a step with no wait seen (a restarted controller) is not observed", func(m *Metrics) {
			m.stepTaken(demo, restart, at(1), at(1.1))
		}, 0, 0},
		{"a wait of another cluster does not count", func(m *Metrics) {
			m.recordDecision(cache.ObjectName{Namespace: "ns", Name: "other"}, wait, at(0))
			m.stepTaken(demo, restart, at(1), at(1.1))
		}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			tt.run(m)
			n, sum, _ := histogram(t, reg, "nats_operator_gate_to_step_seconds", string(rollout.RestartOne))
			if n != tt.samples || sum < tt.sum-1e-9 || sum > tt.sum+1e-9 {
				t.Errorf("gate_to_step{kind=RestartOne}: %d samples, sum %v; want %d, sum %v", n, sum, tt.samples, tt.sum)
			}
			if n, _, _ := histogram(t, reg, "nats_operator_step_duration_seconds", string(rollout.RestartOne)); n == 0 {
				t.Error("step_duration{kind=RestartOne} has no sample")
			}
		})
	}

	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.stepTaken(demo, restart, at(0), at(0.25))
	if _, sum, _ := histogram(t, reg, "nats_operator_step_duration_seconds", string(rollout.RestartOne)); sum < 0.25-1e-9 || sum > 0.25+1e-9 {
		t.Errorf("step_duration sum %v, want 0.25", sum)
	}
	m.recordDecision(demo, wait, at(1))
	if v := testutil.ToFloat64(m.ServersPending.WithLabelValues("ns", "demo")); v != 2 {
		t.Errorf("servers_pending %v, want 2", v)
	}
	m.recordDecision(demo, rollout.Decision{}, at(2))
	if v := testutil.ToFloat64(m.ServersPending.WithLabelValues("ns", "demo")); v != 0 {
		t.Errorf("servers_pending with no rollout %v, want 0", v)
	}
	if n := testutil.CollectAndCount(m.GateWaiting); n != 0 {
		t.Errorf("gate_waiting has %d series with no rollout, want none", n)
	}
}
