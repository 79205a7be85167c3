package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
)

// The controller's histograms the benchmark reads, and the step kind of a
// version change.
const (
	gateToStep   = "nats_operator_gate_to_step_seconds"
	stepDuration = "nats_operator_step_duration_seconds"
	gateWaiting  = "nats_operator_gate_waiting"
	restartOne   = "RestartOne"
)

type scenarioSpec struct {
	ns       string
	servers  int
	load     string
	from, to string
	probe    *probe
}

func (sc scenarioSpec) prefix() string { return fmt.Sprintf("s%d_%s", sc.servers, sc.load) }

// scenario runs one rollout from sc.from to sc.to, under the load, with a
// restart by hand before it, and prints its figures.
func (b *bench) scenario(ctx context.Context, sc scenarioSpec) error {
	p := sc.prefix()
	fmt.Printf("# --- %d servers, %s: %s -> %s\n", sc.servers, sc.load, sc.from, sc.to)
	var ld *load
	if sc.load == "loaded" {
		var err error
		// The pod addresses as they are now (the previous rollout
		// restarted every pod).
		urls := b.s.PodURLs(ctx, b.h, sc.ns, clusterName)
		ld, err = startLoad(ctx, urls, "BENCH.load", b.o.loadPublishers, b.o.loadRate, b.o.loadSize)
		if err != nil {
			return err
		}
		defer ld.stop()
		say("%s: %d async publishers at %d msg/s each; warming up %s", p, b.o.loadPublishers, b.o.loadRate, b.o.loadWarmup)
		time.Sleep(b.o.loadWarmup)
	}
	if b.o.bareByHand {
		if err := b.restartByHand(ctx, sc); err != nil {
			return err
		}
	}

	servers := serverNames(sc.servers)
	tr, err := b.s.StartTracker(ctx, sc.ns, clusterName, servers, b.o.observeEvery)
	if err != nil {
		return err
	}
	defer tr.Stop()
	smp := b.startSampler(ctx, sc.ns)
	defer smp.stop()
	time.Sleep(time.Second) // the samplers' first rounds
	beforeBody := b.metrics()
	probeCount := sc.probe.counter()
	var loadBefore loadCounts
	if ld != nil {
		loadBefore = ld.counts()
	}

	say("%s: rolling %s -> %s", p, sc.from, sc.to)
	patchAt := time.Now()
	if _, err := b.s.Nats.ClusterV1beta1().NatsClusters(sc.ns).Patch(ctx, clusterName, types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"version":%q}}`, sc.to), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching spec.version: %w", err)
	}
	upToDateAt, doneAt, err := smp.waitDone(ctx, sc.to, b.o.timeout)
	if err != nil {
		return fmt.Errorf("%s: the rollout to %s: %w", p, sc.to, err)
	}
	probeAcks := sc.probe.counter() - probeCount
	var loadAfter loadCounts
	if ld != nil {
		loadAfter = ld.counts()
	}
	// A gap still open when the rollout is done counts whole: wait (up to
	// 30 s) for the probe's next ack.
	sc.probe.waitAckAfter(ctx, doneAt, 30*time.Second)
	pw := sc.probe.window(patchAt, doneAt)
	time.Sleep(time.Second) // a last metrics sample after the status said UpToDate
	tr.Stop()
	smp.stop()
	afterBody := b.metrics()
	wall := upToDateAt.Sub(patchAt)
	say("%s: up to date on %s after %s, Ready and Settled after %s", p, sc.to, wall.Round(time.Millisecond), doneAt.Sub(patchAt).Round(time.Millisecond))

	// The steps: the pod deletions the informer saw, in order.
	var dels []framework.PodEvent
	for _, d := range tr.Deletions() {
		if d.At.After(patchAt) {
			dels = append(dels, d)
		}
	}
	obs := tr.Observations()
	type step struct {
		server           string
		at               time.Time
		openAt           time.Time
		readyAt          time.Time
		cut              bool
		gate, dur        float64
		waited           map[string]time.Duration
		lastProgressing  string
		lastStatusWaited string
		clients          []string
	}
	steps := make([]step, len(dels))
	for k, d := range dels {
		st := step{server: strings.TrimSuffix(d.Pod, "-0"), at: d.At, gate: math.NaN(), dur: math.NaN(), waited: map[string]time.Duration{}}
		end := doneAt
		if k+1 < len(dels) {
			end = dels[k+1].At
		}
		st.openAt, st.cut = gateOpenAfter(tr, obs, d, st.server, sc.to, end)
		st.readyAt, _ = tr.ReadyAfter(d.Pod, d.UID, d.At)
		st.clients = smp.clientsBefore(st.server, d.At)
		steps[k] = st
	}
	stepOf := func(t time.Time) int {
		// The step whose deletion is the last before t (a sample up to a
		// second early counts: the step ends, and its metrics are
		// observed, just before the informer reports its deletion).
		k := -1
		for i, d := range dels {
			if !d.At.After(t.Add(time.Second)) {
				k = i
			}
		}
		return k
	}
	// Exact observations from the histograms' sum at each count increment.
	var gateExact, durExact []float64
	mss := smp.metricSamples()
	for i := 1; i < len(mss); i++ {
		prev, cur := mss[i-1], mss[i]
		if dc := cur.gate.count - prev.gate.count; dc > 0 {
			v := (cur.gate.sum - prev.gate.sum) / dc
			for range int(dc) {
				gateExact = append(gateExact, v)
			}
			if k := stepOf(cur.at); k >= 0 && dc == 1 {
				steps[k].gate = v
			}
		}
		if dc := cur.dur.count - prev.dur.count; dc > 0 {
			v := (cur.dur.sum - prev.dur.sum) / dc
			for range int(dc) {
				durExact = append(durExact, v)
			}
			if k := stepOf(cur.at); k >= 0 && dc == 1 {
				steps[k].dur = v
			}
		}
		// What the gate waited on, from the gauge, charged to the step
		// that comes next.
		if k := stepOf(prev.at) + 1; k < len(steps) && prev.at.After(patchAt) {
			for _, w := range prev.waiting {
				steps[k].waited[w] += cur.at.Sub(prev.at)
			}
		}
	}
	for _, ss := range smp.statusSamples() {
		if k := stepOf(ss.at) + 1; k < len(steps) && ss.at.After(patchAt) && ss.at.Before(steps[k].at) {
			if ss.progressing != "" {
				steps[k].lastProgressing = ss.progressing
			}
			if ss.waitingFor != "" {
				steps[k].lastStatusWaited = ss.waitingFor
			}
		}
	}

	// Figures.
	figure(p+"_rollout_wall_seconds", wall, "s")
	figure(p+"_steps", len(dels), "steps")
	if len(dels) != sc.servers {
		fmt.Printf("# %s: %d pod deletions for %d servers\n", p, len(dels), sc.servers)
	}
	var bareSum, readySum time.Duration
	for k, st := range steps {
		bare := st.openAt.Sub(st.at)
		bareSum += bare
		if !st.readyAt.IsZero() {
			readySum += st.readyAt.Sub(st.at)
		}
		cut := ""
		if st.cut {
			cut = " (cut at the next step: the observer never saw the gate open before it)"
		}
		var waited []string
		for _, w := range sortedKeys(st.waited) {
			waited = append(waited, fmt.Sprintf("%s %.1fs", w, st.waited[w].Seconds()))
		}
		fmt.Printf("# %s step %d: %s deleted %s after the change, its clients then %s; gate waited on [%s] (controller gauge, 500 ms samples); last status gate %q; last Progressing before it: %q%s\n",
			p, k+1, st.server, st.at.Sub(patchAt).Round(time.Millisecond), describeClients(st.clients), strings.Join(waited, ", "), st.lastStatusWaited, st.lastProgressing, cut)
		figure(fmt.Sprintf("%s_step%d_bare_seconds", p, k+1), bare, "s")
		if !st.readyAt.IsZero() {
			figure(fmt.Sprintf("%s_step%d_pod_ready_seconds", p, k+1), st.readyAt.Sub(st.at), "s")
		}
		figure(fmt.Sprintf("%s_step%d_gate_to_step_seconds", p, k+1), round(st.gate, 3), "s")
		figure(fmt.Sprintf("%s_step%d_step_duration_seconds", p, k+1), round(st.dur, 3), "s")
		if k > 0 {
			figure(fmt.Sprintf("%s_step%d_observed_open_to_step_seconds", p, k+1), st.at.Sub(steps[k-1].openAt), "s")
		}
	}
	figure(p+"_bare_sum_seconds", bareSum, "s")
	figure(p+"_pod_ready_sum_seconds", readySum, "s")
	if bareSum > 0 {
		figure(p+"_rollout_wall_over_bare_sum", round(wall.Seconds()/bareSum.Seconds(), 3), "ratio")
	}
	if len(steps) > 0 {
		figure(p+"_first_step_after_change_seconds", steps[0].at.Sub(patchAt), "s")
		figure(p+"_last_current_to_uptodate_seconds", upToDateAt.Sub(steps[len(steps)-1].openAt), "s")
	}
	figure(p+"_rollout_settled_seconds", doneAt.Sub(patchAt), "s")
	figure(p+"_uptodate_to_settled_seconds", doneAt.Sub(upToDateAt), "s")
	if lag, why := smp.notSettledAfter(upToDateAt, doneAt); lag > time.Second {
		fmt.Printf("# %s: UpToDate %s before Ready and Settled; the status said meanwhile: %s\n", p, lag.Round(time.Millisecond), why)
	}

	before, after := parseMetrics(beforeBody, "nats_operator_"), parseMetrics(afterBody, "nats_operator_")
	for _, hist := range []struct {
		metric, name string
		exact        []float64
	}{{gateToStep, "gate_to_step", gateExact}, {stepDuration, "step_duration", durExact}} {
		d := readHistogram(after, hist.metric, restartOne).minus(readHistogram(before, hist.metric, restartOne))
		figure(fmt.Sprintf("%s_%s_observed", p, hist.name), d.count, "steps")
		figure(fmt.Sprintf("%s_%s_p50_seconds (histogram)", p, hist.name), round(d.quantile(0.5), 3), "s")
		figure(fmt.Sprintf("%s_%s_p95_seconds (histogram)", p, hist.name), round(d.quantile(0.95), 3), "s")
		figure(fmt.Sprintf("%s_%s_max_seconds (histogram bucket bound)", p, hist.name), round(d.maxBound(), 3), "s")
		figure(fmt.Sprintf("%s_%s_p50_seconds (exact)", p, hist.name), round(nearestRank(hist.exact, 0.5), 3), "s")
		figure(fmt.Sprintf("%s_%s_p95_seconds (exact)", p, hist.name), round(nearestRank(hist.exact, 0.95), 3), "s")
		figure(fmt.Sprintf("%s_%s_max_seconds (exact)", p, hist.name), round(nearestRank(hist.exact, 1), 3), "s")
		if d.count > 0 {
			figure(fmt.Sprintf("%s_%s_mean_seconds", p, hist.name), round(d.sum/d.count, 3), "s")
		}
	}
	// Status writes: one per change a sync finds.
	statusWrites := func(body string) float64 {
		n, _ := framework.SumMetric(body, "nats_operator_api_writes_total", `resource="natsclusters/status"`)
		return n
	}
	figure(p+"_status_writes", statusWrites(afterBody)-statusWrites(beforeBody), "writes")
	if n := otherSteps(before, after); n != 0 {
		fmt.Printf("# %s: %v steps of kinds other than %s\n", p, n, restartOne)
	}

	// The probe.
	figure(p+"_probe_max_ack_gap_seconds", pw.maxGap.to.Sub(pw.maxGap.from), "s")
	if !pw.maxGap.from.IsZero() {
		k := stepOf(pw.maxGap.from)
		during := "before the first step"
		if k >= 0 {
			during = fmt.Sprintf("after step %d (%s deleted %s before the gap began)", k+1, steps[k].server, pw.maxGap.from.Sub(steps[k].at).Round(time.Millisecond))
		}
		fmt.Printf("# %s probe's longest gap: from %s to %s after the change, %s\n", p,
			pw.maxGap.from.Sub(patchAt).Round(time.Millisecond), pw.maxGap.to.Sub(patchAt).Round(time.Millisecond), during)
	}
	figure(p+"_probe_errors", pw.errors, "errors")
	figure(p+"_probe_timeouts", pw.timeouts, "errors")
	if pw.firstErrorText != "" {
		fmt.Printf("# %s probe's first error: %s\n", p, pw.firstErrorText)
	}
	figure(p+"_probe_acks", probeAcks, "msgs")
	figure(p+"_probe_ack_rate", round(float64(probeAcks)/wall.Seconds(), 0), "msgs/s")
	if ld != nil {
		secs := loadAfter.at.Sub(loadBefore.at).Seconds()
		offered := loadAfter.published - loadBefore.published
		acked := offered - (loadAfter.errors - loadBefore.errors) - (loadAfter.pending - loadBefore.pending)
		figure(p+"_load_published_rate", round(float64(offered)/secs, 0), "msgs/s")
		figure(p+"_load_acked_rate", round(float64(acked)/secs, 0), "msgs/s")
		figure(p+"_load_errors", loadAfter.errors-loadBefore.errors, "errors")
		if e := ld.firstError.Load(); e != nil {
			fmt.Printf("# %s load's first error (since the publishers started): %s\n", p, *e)
		}
		figure(p+"_load_stalls", loadAfter.stalls-loadBefore.stalls, "ticks")
	}
	return nil
}

// gateOpenAfter returns the first observation after the deletion d of the
// server's pod that sees the gate open as the controller's would: a new pod
// of the server Ready, every pod Ready, every server answering, the server
// on version and the cluster Settled. When none comes before end, it
// returns end, cut.
func gateOpenAfter(tr *framework.Tracker, obs []framework.Observation, d framework.PodEvent, server, version string, end time.Time) (time.Time, bool) {
	readyAt, ok := tr.ReadyAfter(d.Pod, d.UID, d.At)
	if ok {
		for _, o := range obs {
			if o.At.After(d.At) && !o.At.Before(readyAt) && o.GateOpen() && o.Versions[server] == version {
				if o.At.After(end) {
					break
				}
				return o.At, false
			}
		}
	}
	return end, true
}

// restartByHand deletes the pod of the highest-ordinal server that does not
// lead the meta group, as the controller's step does, and times it as a
// step's bare restart; then waits for the cluster to be Settled and up to
// date again.
func (b *bench) restartByHand(ctx context.Context, sc scenarioSpec) error {
	p := sc.prefix()
	nc, err := b.s.Cluster(ctx, sc.ns, clusterName)
	if err != nil {
		return err
	}
	leader := ""
	if nc.Status.JetStream != nil {
		leader = nc.Status.JetStream.MetaLeader
	}
	servers := serverNames(sc.servers)
	victim := servers[len(servers)-1]
	if victim == leader {
		victim = servers[len(servers)-2]
	}
	tr, err := b.s.StartTracker(ctx, sc.ns, clusterName, servers, b.o.observeEvery)
	if err != nil {
		return err
	}
	defer tr.Stop()
	time.Sleep(time.Second)
	var clients []string
	if pod, err := b.s.Kube.CoreV1().Pods(sc.ns).Get(ctx, victim+"-0", metav1.GetOptions{}); err == nil {
		clients, _ = connzNames(pod.Status.PodIP)
	}
	say("%s: restarting %s by hand", p, victim)
	start := time.Now()
	if err := b.s.Kube.CoreV1().Pods(sc.ns).Delete(ctx, victim+"-0", metav1.DeleteOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	var openAt time.Time
	var del framework.PodEvent
	for openAt.IsZero() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s was not back and current within 5 minutes of its deletion", p, victim)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		dels := tr.Deletions()
		if len(dels) == 0 {
			continue
		}
		del = dels[0]
		if at, cut := gateOpenAfter(tr, tr.Observations(), del, victim, sc.from, time.Now()); !cut {
			openAt = at
		}
	}
	sc.probe.waitAckAfter(ctx, openAt, 30*time.Second)
	pw := sc.probe.window(start, openAt)
	tr.Stop()
	fmt.Printf("# %s by hand: %s deleted, its clients then %s\n", p, victim, describeClients(clients))
	figure(fmt.Sprintf("%s_bare_by_hand_seconds (%s)", p, victim), openAt.Sub(del.At), "s")
	figure(p+"_bare_by_hand_probe_max_ack_gap_seconds", pw.maxGap.to.Sub(pw.maxGap.from), "s")
	figure(p+"_bare_by_hand_probe_errors", pw.errors, "errors")
	say("%s: %s back and current %s after its deletion; waiting for the controller to say so", p, victim, openAt.Sub(del.At).Round(time.Millisecond))
	b.s.WaitSettledUpToDate(ctx, b.h, sc.ns, clusterName, 3*time.Minute)
	time.Sleep(2 * time.Second)
	return nil
}

// metrics reads the controller's /metrics ("" when it does not answer).
func (b *bench) metrics() string {
	_, body, _ := framework.Get(b.metricsURL)
	return body
}

// otherSteps counts the rollout steps of kinds other than RestartOne
// between two scrapes.
func otherSteps(before, after []sample) float64 {
	sum := func(ss []sample) float64 {
		n := 0.0
		for _, s := range ss {
			if s.name == "nats_operator_rollout_steps_total" && s.labels["kind"] != restartOne {
				n += s.value
			}
		}
		return n
	}
	return sum(after) - sum(before)
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// statusSample is the NatsCluster as the sampler read it.
type statusSample struct {
	at          time.Time
	waitingFor  string
	progressing string
	upToDate    bool
	done        bool
	notDone     string
	version     string
}

// metricSample is the controller's /metrics as the sampler read it.
type metricSample struct {
	at        time.Time
	gate, dur histogram
	waiting   []string
}

// sampler reads the NatsCluster every 200 ms and the controller's /metrics
// every 500 ms.
type sampler struct {
	mu       sync.Mutex
	statuses []statusSample
	ms       []metricSample
	connz    []connzSample
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
}

func (b *bench) startSampler(ctx context.Context, ns string) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	smp := &sampler{cancel: cancel}
	every := func(d time.Duration, fn func()) {
		smp.wg.Go(func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				fn()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	every(200*time.Millisecond, func() {
		nc, err := b.s.Cluster(ctx, ns, clusterName)
		if err != nil {
			return
		}
		ss := statusSample{at: time.Now(), version: nc.Status.Version,
			upToDate: framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonUpToDate) == nil}
		if err := framework.CheckSettledUpToDate(nc); err != nil {
			ss.notDone = err.Error()
		} else {
			ss.done = true
		}
		if r := nc.Status.Rollout; r != nil && r.Gate != nil {
			ss.waitingFor = r.Gate.WaitingFor
		}
		if c := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue {
			ss.progressing = c.Reason + ": " + c.Message
		}
		smp.mu.Lock()
		smp.statuses = append(smp.statuses, ss)
		smp.mu.Unlock()
	})
	every(500*time.Millisecond, func() {
		body := b.metrics()
		if body == "" {
			return
		}
		all := parseMetrics(body, "nats_operator_")
		ms := metricSample{
			at:      time.Now(),
			gate:    readHistogram(all, gateToStep, restartOne),
			dur:     readHistogram(all, stepDuration, restartOne),
			waiting: gaugeLabels(all, gateWaiting, "waiting_for", map[string]string{"namespace": ns, "name": clusterName}),
		}
		smp.mu.Lock()
		smp.ms = append(smp.ms, ms)
		smp.mu.Unlock()
	})
	every(time.Second, func() {
		pods, err := b.s.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=" + clusterName})
		if err != nil {
			return
		}
		for _, pod := range pods.Items {
			if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
				continue
			}
			names, err := connzNames(pod.Status.PodIP)
			if err != nil {
				continue
			}
			smp.mu.Lock()
			smp.connz = append(smp.connz, connzSample{at: time.Now(), server: strings.TrimSuffix(pod.Name, "-0"), names: names})
			smp.mu.Unlock()
		}
	})
	return smp
}

// connzSample is the client connections of one server.
type connzSample struct {
	at     time.Time
	server string
	names  []string
}

// clientsBefore returns the names of the server's client connections in
// the last sample before t.
func (smp *sampler) clientsBefore(server string, t time.Time) []string {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	var names []string
	found := false
	for _, c := range smp.connz {
		if c.server == server && c.at.Before(t) {
			names, found = c.names, true
		}
	}
	if !found {
		return nil
	}
	if names == nil {
		names = []string{}
	}
	return names
}

// connzNames asks a server's /connz for the names of its client
// connections (routes are not clients).
func connzNames(ip string) ([]string, error) {
	code, body, err := framework.Get(fmt.Sprintf("http://%s:%d/connz?limit=1024", ip, render.MonitorPort))
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/connz: HTTP %d", code)
	}
	var connz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if err := json.Unmarshal([]byte(body), &connz); err != nil {
		return nil, err
	}
	names := []string{}
	for _, c := range connz.Connections {
		name := c.Name
		if name == "" {
			name = "(unnamed)"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// describeClients says what clients a server had: "unknown" when not
// sampled.
func describeClients(names []string) string {
	if names == nil {
		return "unknown"
	}
	if len(names) == 0 {
		return "none (lame duck mode exits at once)"
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// waitDone waits for the first sample, taken after this call, that is
// Ready, Settled and Progressing=False UpToDate with status.version
// version, and returns its time and that of the first sample (after this
// call) that was Progressing=False UpToDate on version.
func (smp *sampler) waitDone(ctx context.Context, version string, timeout time.Duration) (upToDate, done time.Time, err error) {
	since := time.Now()
	deadline := since.Add(timeout)
	for {
		smp.mu.Lock()
		var last statusSample
		for _, ss := range smp.statuses {
			if !ss.at.After(since) {
				continue
			}
			last = ss
			if ss.upToDate && ss.version == version && upToDate.IsZero() {
				upToDate = ss.at
			}
			if ss.done && ss.version == version {
				smp.mu.Unlock()
				if upToDate.IsZero() {
					upToDate = ss.at
				}
				return upToDate, ss.at, nil
			}
		}
		smp.mu.Unlock()
		upToDate = time.Time{}
		if time.Now().After(deadline) {
			return time.Time{}, time.Time{}, fmt.Errorf("not up to date within %s (last: %s; status.version %q)", timeout, last.notDone, last.version)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, errors.Join(ctx.Err(), errors.New("interrupted"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notSettledAfter returns how long the samples from from to to were not
// done, and the last reason they gave.
func (smp *sampler) notSettledAfter(from, to time.Time) (time.Duration, string) {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	why := ""
	for _, ss := range smp.statuses {
		if !ss.at.Before(from) && ss.at.Before(to) && ss.notDone != "" {
			why = ss.notDone
		}
	}
	return to.Sub(from), why
}

func (smp *sampler) stop() {
	smp.once.Do(func() {
		smp.cancel()
		smp.wg.Wait()
	})
}

func (smp *sampler) statusSamples() []statusSample {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	return append([]statusSample(nil), smp.statuses...)
}

func (smp *sampler) metricSamples() []metricSample {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	return append([]metricSample(nil), smp.ms...)
}
