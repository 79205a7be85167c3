package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
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
	// slowest is the longest single cluster's rollout: from the first
	// sample that saw it Progressing=True to the one that saw it done;
	// slowestKey is that cluster, lastKey the cluster seen done last.
	slowest             time.Duration
	slowestKey, lastKey string
	// maxStart is the longest a cluster waited, from start, before it was
	// first seen Progressing=True.
	maxStart time.Duration
	// doneAt is when each cluster (namespace/name) was seen done, and
	// progressingAt when it was first seen Progressing=True.
	doneAt, progressingAt map[string]time.Time
}

// waitUpToDate looks every 500 ms (at the watch b.clusters) until every cluster is Ready, Settled and
// Progressing=False UpToDate for its generation on version; sample is
// called at each poll.
func (b *bench) waitUpToDate(ctx context.Context, start time.Time, version string, timeout time.Duration, sample func()) (waitResult, error) {
	var res waitResult
	progressingAt := map[string]time.Time{}
	doneAt := map[string]time.Time{}
	lastReport := time.Now()
	for {
		if sample != nil {
			sample()
		}
		list, err := b.clusters.List(labels.Everything())
		if err != nil {
			return res, err
		}
		now := time.Now()
		var notDone string
		for _, nc := range list {
			key := nc.Namespace + "/" + nc.Name
			if _, ok := doneAt[key]; ok {
				continue
			}
			if _, ok := progressingAt[key]; !ok && meta.IsStatusConditionTrue(nc.Status.Conditions, clusterv1beta1.ConditionProgressing) {
				progressingAt[key] = now
			}
			if err := framework.CheckSettledUpToDate(nc); err != nil || nc.Status.Version != version || nc.Spec.Version != version {
				if notDone == "" {
					notDone = fmt.Sprintf("%s: version %s: %v", key, nc.Status.Version, err)
				}
				continue
			}
			doneAt[key] = now
			if len(doneAt) == 1 {
				res.first = now.Sub(start)
			}
			from, ok := progressingAt[key]
			if !ok {
				from = start
			}
			if now.Sub(from) > res.slowest || res.slowestKey == "" {
				res.slowest, res.slowestKey = now.Sub(from), key
			}
			res.lastKey = key
			res.maxStart = max(res.maxStart, from.Sub(start))
		}
		if len(doneAt) >= b.o.clusters {
			res.all = now.Sub(start)
			res.doneAt, res.progressingAt = doneAt, progressingAt
			return res, nil
		}
		if time.Since(lastReport) > 15*time.Second {
			say("  %d/%d up to date after %s; e.g. %s", len(doneAt), b.o.clusters, time.Since(start).Round(time.Second), notDone)
			lastReport = time.Now()
		}
		if time.Since(start) > timeout {
			return res, fmt.Errorf("after %s, %d/%d clusters up to date on %s; e.g. %s", timeout, len(doneAt), b.o.clusters, version, notDone)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
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
	b.specSeen.arm(to)
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
	figure(p+"_slowest_cluster_rollout_seconds", round(res.slowest.Seconds(), 1), "s")
	figure(p+"_longest_wait_to_progressing_seconds", round(res.maxStart.Seconds(), 1), "s")
	// The controller's part of that wait: from each cluster's own patch
	// (its response) to the sample that first saw it Progressing.
	var fromPatch time.Duration
	var longest string
	for key, at := range res.progressingAt {
		if p, ok := patchedAt[key]; ok && at.Sub(p) > fromPatch {
			fromPatch, longest = at.Sub(p), key
		}
	}
	figure(p+"_longest_wait_from_its_patch_to_progressing_seconds", round(fromPatch.Seconds(), 1), "s")
	// How late the API server's watch events came: from each cluster's
	// patch response to the bench's watch showing the new version.
	var watchDelays []time.Duration
	for key, p := range patchedAt {
		if at, ok := b.specSeen.seenAt(key); ok {
			watchDelays = append(watchDelays, max(0, at.Sub(p)))
		}
	}
	slices.Sort(watchDelays)
	if len(watchDelays) > 0 {
		figure(p+"_watch_delay_p50_seconds", round(quantile(watchDelays, 0.5).Seconds(), 2), "s")
		figure(p+"_watch_delay_max_seconds", round(quantile(watchDelays, 1).Seconds(), 2), "s")
	}
	if longest != "" {
		seen, _ := b.specSeen.seenAt(longest)
		fmt.Printf("# that cluster: %s, patched at %s, its new spec on the bench's watch at %s, first seen Progressing at %s\n", longest,
			sinceStart(start, patchedAt[longest]), sinceStart(start, seen), sinceStart(start, res.progressingAt[longest]))
	}
	// The cluster up to date last, and the one whose own rollout was the
	// slowest: where their time went.
	for _, c := range []struct{ what, key string }{{"up to date last", res.lastKey}, {"slowest rollout", res.slowestKey}} {
		if c.key == "" {
			continue
		}
		fmt.Printf("# %s: %s, patched at %s, Progressing seen at %s, %s\n", c.what, c.key,
			sinceStart(start, patchedAt[c.key]), sinceStart(start, res.progressingAt[c.key]),
			b.pods.describe(c.key, start, res.doneAt[c.key]))
	}
	figure(p+"_workqueue_depth_max", depthMax, "items")
	// Where each cluster's time went, from its pod's events (podPhases).
	for _, ph := range b.pods.phases(start, res.doneAt) {
		figure(p+"_phase_"+ph.name+"_clusters", len(ph.d), "clusters")
		figure(p+"_phase_"+ph.name+"_p50_seconds", round(quantile(ph.d, 0.5).Seconds(), 1), "s")
		figure(p+"_phase_"+ph.name+"_max_seconds", round(quantile(ph.d, 1).Seconds(), 1), "s")
	}
	for _, h := range []string{"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"} {
		hb, ha := histogram(before, h), histogram(after, h)
		d := ha.minus(hb)
		short := strings.TrimSuffix(strings.TrimPrefix(h, "workqueue_"), "_seconds")
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

// hist is a Prometheus histogram of name="natscluster": cumulative counts
// by upper bound.
type hist struct {
	buckets map[float64]float64
	sum     float64
	count   float64
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

func histogram(body, name string) hist {
	h := hist{buckets: map[float64]float64{}}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"_bucket{") || !strings.Contains(line, `name="natscluster"`) {
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
	h.sum, _ = framework.SumMetric(body, name+"_sum", `name="natscluster"`)
	h.count, _ = framework.SumMetric(body, name+"_count", `name="natscluster"`)
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
