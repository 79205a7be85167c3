package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/test/framework"
)

func natsNamespace(i int) string { return fmt.Sprintf("bench-nats-%d", i) }

func clusterName(i int) string { return fmt.Sprintf("c%03d", i) }

// forEachCluster runs fn for every cluster, 16 at a time.
func (b *bench) forEachCluster(fn func(ns, name string) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, 16)
	for i := range b.o.clusters {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := fn(natsNamespace(i%b.o.namespaces), clusterName(i)); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

// createClusters creates the NatsClusters (the example JetStream cluster,
// 1 server) and times until all are Ready, Settled and up to date.
func (b *bench) createClusters(ctx context.Context) error {
	example, err := framework.ExampleObject("natscluster-jetstream.yaml", "NatsCluster")
	if err != nil {
		return err
	}
	for i := range b.o.namespaces {
		// As framework.Stack.CreateNamespace: the restricted Pod Security
		// Standard is enforced.
		if err := b.createNamespace(ctx, natsNamespace(i), map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}); err != nil {
			return err
		}
	}
	say("creating %d NatsClusters of 1 server (nats-server %s, JetStream %v) in %d namespaces", b.o.clusters, b.o.fromVersion, b.o.jetStream, b.o.namespaces)
	fmt.Printf("# NatsClusters: the example of manifests/examples/natscluster-jetstream.yaml with replicas 1; spec.jetstream kept: %v\n", b.o.jetStream)
	b.watched.arm(b.o.fromVersion)
	start := time.Now()
	err = b.forEachCluster(func(ns, name string) error {
		o := example.DeepCopy()
		o.SetName(name)
		_ = unstructured.SetNestedField(o.Object, int64(1), "spec", "replicas")
		_ = unstructured.SetNestedField(o.Object, b.o.fromVersion, "spec", "version")
		if !b.o.jetStream {
			unstructured.RemoveNestedField(o.Object, "spec", "jetstream")
		}
		return framework.ApplyObjects(ctx, b.env.Config, ns, o)
	})
	if err != nil {
		return err
	}
	created := time.Since(start)
	res, err := b.waitUpToDate(ctx, start, b.o.fromVersion, 15*time.Minute, nil)
	if err != nil {
		return err
	}
	figure("create_clusters", b.o.clusters, "clusters")
	figure("create_apply_seconds", round(created.Seconds(), 1), "s")
	figure("create_all_ready_settled_seconds", round(res.all.Seconds(), 1), "s")
	figure("create_first_ready_settled_seconds", round(res.first.Seconds(), 1), "s")
	return nil
}

type waitResult struct {
	// all is until the last cluster, first until the first one.
	all, first time.Duration
	// slowest is the longest single cluster's own rollout: from its first
	// step (the watch showing a server's StatefulSet template on the
	// version) or, if the watch showed it first, Progressing=True, to
	// done; slowestKey is that cluster, lastKey the cluster done last.
	slowest             time.Duration
	slowestKey, lastKey string
	// fromProgressing is the same from Progressing=True alone, as the
	// bench timed a cluster's own rollout before run 11e: the controller
	// writes Progressing after its step's writes (template, ConfigMap, pod
	// deletion), so that time leaves out the first step's own writes.
	fromProgressing    time.Duration
	fromProgressingKey string
	// maxStart is the longest a cluster waited, from start, before it was
	// first seen Progressing=True; maxStep before its first step.
	maxStart, maxStep time.Duration
	// The times by cluster (namespace/name), from the bench's watches.
	watched
}

// waitUpToDate waits until the watch (b.watched, armed for version before
// the change) has seen every cluster Ready, Settled and up to date on
// version, looking every 500 ms; sample, if not nil, runs at each look.
// The times are the watch's (watchTimes), not the looks'.
func (b *bench) waitUpToDate(ctx context.Context, start time.Time, version string, timeout time.Duration, sample func()) (waitResult, error) {
	lastReport := time.Now()
	for b.watched.doneCount() < b.o.clusters {
		if sample != nil {
			sample()
		}
		if time.Since(lastReport) > 15*time.Second || time.Since(start) > timeout {
			msg := fmt.Sprintf("%d/%d up to date after %s; e.g. %s", b.watched.doneCount(), b.o.clusters, time.Since(start).Round(time.Second), b.notUpToDate(version))
			if time.Since(start) > timeout {
				return waitResult{}, fmt.Errorf("after %s, %s", timeout, msg)
			}
			say("  %s", msg)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return waitResult{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return timesOf(start, b.watched.times()), nil
}

// timesOf reads the change's figures from the watches' times.
func timesOf(start time.Time, w watched) waitResult {
	res := waitResult{watched: w}
	for _, key := range slices.Sorted(maps.Keys(w.done)) {
		at := w.done[key]
		if d := at.Sub(start); d > res.all || res.lastKey == "" {
			res.all, res.lastKey = d, key
		}
		if d := at.Sub(start); d < res.first || res.first == 0 {
			res.first = d
		}
		progressing, ok := w.progressing[key]
		if !ok {
			progressing = start
		}
		from := progressing
		if step, ok := w.step[key]; ok && step.Before(from) {
			from = step
		}
		if d := at.Sub(from); d > res.slowest || res.slowestKey == "" {
			res.slowest, res.slowestKey = d, key
		}
		if d := at.Sub(progressing); d > res.fromProgressing || res.fromProgressingKey == "" {
			res.fromProgressing, res.fromProgressingKey = d, key
		}
		res.maxStart = max(res.maxStart, progressing.Sub(start))
		res.maxStep = max(res.maxStep, from.Sub(start))
	}
	return res
}

// notUpToDate says why one cluster the watch has not seen done is not.
func (b *bench) notUpToDate(version string) string {
	list, err := b.clusters.List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	done := b.watched.times().done
	for _, nc := range list {
		key := nc.Namespace + "/" + nc.Name
		if _, ok := done[key]; !ok {
			return fmt.Sprintf("%s: version %s: %v", key, nc.Status.Version, upToDate(nc, version))
		}
	}
	return "every cluster listed is done"
}

// versionChange restarts the controller with workers, changes every
// cluster from one version to the next, and times until all are on it.
func (b *bench) versionChange(ctx context.Context, ctrl *controller, workers int, from, to string) error {
	say("restarting the controller with --workers %d", workers)
	ctrl.stop()
	if err := ctrl.start(ctx, workers); err != nil {
		return err
	}
	// Let the syncs of the start (one per cluster, each writing nothing)
	// pass before the baseline.
	time.Sleep(15 * time.Second)
	before := ctrl.metricsBody()
	apiBefore, flowBefore, err := b.apiserverMetrics(ctx)
	if err != nil {
		return err
	}
	depthMax := 0.0
	sample := func() {
		if d, ok := framework.SumMetric(ctrl.metricsBody(), "workqueue_depth", `name="natscluster"`); ok {
			depthMax = math.Max(depthMax, d)
		}
	}
	say("changing spec.version of %d clusters %s -> %s", b.o.clusters, from, to)
	b.pods.arm()
	b.watched.arm(to)
	start := time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, to))
	var mu sync.Mutex
	patchedAt := map[string]time.Time{}
	err = b.forEachCluster(func(ns, name string) error {
		_, err := b.nats.ClusterV1beta1().NatsClusters(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		mu.Lock()
		patchedAt[ns+"/"+name] = time.Now()
		mu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	patched := time.Since(start)
	res, err := b.waitUpToDate(ctx, start, to, 30*time.Minute, sample)
	if err != nil {
		return err
	}
	after := ctrl.metricsBody()
	apiAfter, flowAfter, err := b.apiserverMetrics(ctx)
	if err != nil {
		return err
	}
	p := fmt.Sprintf("version_change_workers_%d", workers)
	fmt.Printf("# version change %s -> %s with --workers %d\n", from, to, workers)
	figure(p+"_patch_seconds", round(patched.Seconds(), 1), "s")
	figure(p+"_all_up_to_date_seconds", round(res.all.Seconds(), 1), "s")
	figure(p+"_first_up_to_date_seconds", round(res.first.Seconds(), 1), "s")
	// A cluster's own rollout from its first step (the watch showing a
	// server's StatefulSet template on the version) or its Progressing,
	// whichever came first, to done; and from Progressing alone, as
	// before run 11e (the controller writes Progressing after its step's
	// writes).
	figure(p+"_slowest_cluster_rollout_seconds", round(res.slowest.Seconds(), 1), "s")
	figure(p+"_all_over_slowest_ratio", round(res.all.Seconds()/res.slowest.Seconds(), 2), "x")
	figure(p+"_slowest_cluster_rollout_from_progressing_seconds", round(res.fromProgressing.Seconds(), 1), "s")
	figure(p+"_all_over_slowest_from_progressing_ratio", round(res.all.Seconds()/res.fromProgressing.Seconds(), 2), "x")
	figure(p+"_longest_wait_to_first_step_seconds", round(res.maxStep.Seconds(), 1), "s")
	figure(p+"_longest_wait_to_progressing_seconds", round(res.maxStart.Seconds(), 1), "s")
	// The controller's part of that wait: from each cluster's own patch
	// (its response) to the sample that first saw it Progressing.
	var fromPatch time.Duration
	var longest string
	for key, at := range res.progressing {
		if p, ok := patchedAt[key]; ok && at.Sub(p) > fromPatch {
			fromPatch, longest = at.Sub(p), key
		}
	}
	figure(p+"_longest_wait_from_its_patch_to_progressing_seconds", round(fromPatch.Seconds(), 1), "s")
	// How late the API server's watch events came: from each cluster's
	// patch response to the bench's watch showing the new version.
	var watchDelays []time.Duration
	for key, p := range patchedAt {
		if at, ok := res.spec[key]; ok {
			watchDelays = append(watchDelays, max(0, at.Sub(p)))
		}
	}
	slices.Sort(watchDelays)
	if len(watchDelays) > 0 {
		figure(p+"_watch_delay_p50_seconds", round(quantile(watchDelays, 0.5).Seconds(), 2), "s")
		figure(p+"_watch_delay_max_seconds", round(quantile(watchDelays, 1).Seconds(), 2), "s")
	}
	if longest != "" {
		seen := res.spec[longest]
		fmt.Printf("# that cluster: %s, patched at %s, its new spec on the bench's watch at %s, first seen Progressing at %s\n", longest,
			sinceStart(start, patchedAt[longest]), sinceStart(start, seen), sinceStart(start, res.progressing[longest]))
	}
	// The cluster up to date last, and the one whose own rollout was the
	// slowest: where their time went.
	for _, c := range []struct{ what, key string }{
		{"up to date last", res.lastKey}, {"slowest rollout", res.slowestKey}, {"slowest rollout from Progressing", res.fromProgressingKey},
	} {
		if c.key == "" {
			continue
		}
		fmt.Printf("# %s: %s, patched at %s, first step seen at %s, Progressing seen at %s, %s\n", c.what, c.key,
			sinceStart(start, patchedAt[c.key]), sinceStart(start, res.step[c.key]), sinceStart(start, res.progressing[c.key]),
			b.pods.describe(c.key, start, res.done[c.key]))
	}
	figure(p+"_workqueue_depth_max", depthMax, "items")
	// Where each cluster's time went, from its pod's events (podPhases).
	for _, ph := range b.pods.phases(start, res.done) {
		figure(p+"_phase_"+ph.name+"_clusters", len(ph.d), "clusters")
		figure(p+"_phase_"+ph.name+"_p50_seconds", round(quantile(ph.d, 0.5).Seconds(), 1), "s")
		figure(p+"_phase_"+ph.name+"_max_seconds", round(quantile(ph.d, 1).Seconds(), 1), "s")
	}
	for _, h := range []struct{ name, label, short string }{
		{"workqueue_queue_duration_seconds", `name="natscluster"`, "queue_duration"},
		{"workqueue_work_duration_seconds", `name="natscluster"`, "work_duration"},
		// The restart steps' own time (their writes), as the controller
		// measures it: what a cluster's rollout timed from Progressing
		// leaves out of its first step.
		{"nats_operator_step_duration_seconds", `kind="RestartOne"`, "restart_step_duration"},
	} {
		d := histogram(after, h.name, h.label).minus(histogram(before, h.name, h.label))
		short := h.short
		figure(p+"_"+short+"_count", d.count, "items")
		if d.count > 0 {
			figure(p+"_"+short+"_mean_seconds", round(d.sum/d.count, 4), "s")
			figure(p+"_"+short+"_p50_le_seconds", d.quantile(0.5), "s")
			figure(p+"_"+short+"_p99_le_seconds", d.quantile(0.99), "s")
		}
	}
	for _, m := range []string{"nats_operator_api_writes_total"} {
		vb, _ := framework.SumMetric(before, m)
		va, _ := framework.SumMetric(after, m)
		figure(p+"_controller_counted_api_writes", va-vb, "writes")
	}
	// Every client's requests, as the API server counts them (the
	// patches of the bench, the controller, kube-controller-manager, the
	// node).
	apiAfter.minus(apiBefore).print(p, 14)
	// Whether those requests queued in the API server's flow control (a
	// FlowSchema could then favour the steps) or waited on the machine.
	figure(p+"_apiserver_flowcontrol_queued_requests", flowAfter.count-flowBefore.count, "requests")
	figure(p+"_apiserver_flowcontrol_wait_seconds", round(flowAfter.seconds-flowBefore.seconds, 2), "s")
	return nil
}

// hist is a Prometheus histogram of one label: cumulative counts by upper
// bound.
type hist struct {
	buckets map[float64]float64
	sum     float64
	count   float64
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

// histogram reads the histogram name of the series with label (as in
// `name="natscluster"`) from a /metrics body.
func histogram(body, name, label string) hist {
	h := hist{buckets: map[float64]float64{}}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"_bucket{") || !strings.Contains(line, label) {
			continue
		}
		m := leLabel.FindStringSubmatch(line)
		f := strings.Fields(line)
		if m == nil || len(f) < 2 {
			continue
		}
		le, err1 := strconv.ParseFloat(m[1], 64)
		v, err2 := strconv.ParseFloat(f[len(f)-1], 64)
		if err1 == nil && err2 == nil {
			h.buckets[le] = v
		}
	}
	h.sum, _ = framework.SumMetric(body, name+"_sum", label)
	h.count, _ = framework.SumMetric(body, name+"_count", label)
	return h
}

func (h hist) minus(o hist) hist {
	d := hist{buckets: map[float64]float64{}, sum: h.sum - o.sum, count: h.count - o.count}
	for le, v := range h.buckets {
		d.buckets[le] = v - o.buckets[le]
	}
	return d
}

// quantile is the upper bound of the bucket that holds quantile q.
func (h hist) quantile(q float64) float64 {
	var les []float64
	for le := range h.buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	for _, le := range les {
		if h.buckets[le] >= q*h.count {
			return le
		}
	}
	return math.Inf(1)
}
