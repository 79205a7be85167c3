package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// atRest measures the controller over one window with nothing to do: CPU,
// RSS, heap, API requests by verb and, with servers, the monitoring
// requests it sends them.
func (b *bench) atRest(ctx context.Context, ctrl *controller, label string, servers bool) error {
	say("%s: settling %s, then measuring over %s", label, b.o.settle, b.o.window)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.settle):
	}
	var srv []server
	var before map[string]map[string]float64
	if servers {
		var err error
		if srv, err = b.servers(ctx); err != nil {
			return err
		}
		before = readStats(srv)
	}
	p0, err := ctrl.proc()
	if err != nil {
		return err
	}
	off := ctrl.logSize()
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.window):
	}
	p1, err := ctrl.proc()
	if err != nil {
		return err
	}
	logPart := ctrl.log(off)
	elapsed := time.Since(start)
	body := ctrl.metricsBody()
	var after map[string]map[string]float64
	monitorElapsed := elapsed
	if servers {
		// An observation at rest comes every 2 minutes: a shorter window
		// would see each server 0 or 1 times.
		if more := b.o.monitorWindow - time.Since(start); more > 0 {
			say("%s: measuring monitoring requests %s longer", label, more.Round(time.Second))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(more):
			}
		}
		monitorElapsed = time.Since(start)
		after = readStats(srv)
	}

	fmt.Printf("# %s: window %s, %s to %s\n", label, elapsed.Round(time.Second), start.Format("15:04:05"), start.Add(elapsed).Format("15:04:05"))
	figure(label+"_rss", round(p1.rssMiB, 1), "MiB")
	figure(label+"_rss_peak_so_far", round(p1.hwmMiB, 1), "MiB")
	figure(label+"_cpu_seconds_per_60s", round((p1.cpuSeconds-p0.cpuSeconds)*60/elapsed.Seconds(), 2), "s")
	for _, m := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_memstats_stack_inuse_bytes"} {
		if v, ok := framework.SumMetric(body, m); ok {
			figure(label+"_"+strings.TrimPrefix(m, "go_memstats_"), round(v/(1<<20), 1), "MiB")
		}
	}
	if v, ok := framework.SumMetric(body, "go_goroutines"); ok {
		figure(label+"_goroutines", v, "goroutines")
	}

	perMin := 60 / elapsed.Seconds()
	a := countRequests(logPart)
	figure(label+"_api_requests_per_min", round(float64(a.total(a.byVerb))*perMin, 1), "requests/min")
	figure(label+"_api_writes_per_min", round(float64(a.writes(a.byVerb))*perMin, 1), "writes/min")
	for _, v := range []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"} {
		figure(label+"_api_"+v+"_per_min", round(float64(a.byVerb[v])*perMin, 1), "requests/min")
	}
	for _, k := range sortedKeys(a.resources) {
		fmt.Printf("#   %s: %d in the window\n", k, a.resources[k])
	}
	figure(label+"_api_lease_requests_per_min", round(float64(a.total(a.leaseByVerb))*perMin, 1), "requests/min")
	figure(label+"_api_lease_writes_per_min", round(float64(a.writes(a.leaseByVerb))*perMin, 1), "writes/min")
	fmt.Println("# API requests are counted from the controller's -v=6 log (client-go Response lines); Lease requests (leader election renewals) apart")

	if servers {
		b.monitoringCost(label, srv, before, after, monitorElapsed)
	}
	return nil
}

// server is one nats-server pod: its monitoring address and the periods of
// its probes that ask /healthz.
type server struct {
	pod        string
	ip         string
	probeEvery []int32
}

func (b *bench) servers(ctx context.Context) ([]server, error) {
	pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		LabelSelector: clusterv1beta1.LabelManagedBy + "=" + clusterv1beta1.ManagedByValue,
	})
	if err != nil {
		return nil, err
	}
	var out []server
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
			continue
		}
		s := server{pod: p.Namespace + "/" + p.Name, ip: p.Status.PodIP}
		for _, c := range p.Spec.Containers {
			for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
				if pr != nil && pr.HTTPGet != nil && strings.HasPrefix(pr.HTTPGet.Path, "/healthz") {
					s.probeEvery = append(s.probeEvery, pr.PeriodSeconds)
				}
			}
		}
		out = append(out, s)
	}
	if len(out) != b.o.clusters {
		return nil, fmt.Errorf("found %d server pods with an address, want %d", len(out), b.o.clusters)
	}
	return out, nil
}

// readStats reads every server's /varz http_req_stats, in parallel.
func readStats(srv []server) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range srv {
		wg.Go(func() {
			_, body, err := framework.Get("http://" + s.ip + ":8222/varz")
			if err != nil {
				return
			}
			var v struct {
				Stats map[string]float64 `json:"http_req_stats"`
			}
			if json.Unmarshal([]byte(body), &v) != nil {
				return
			}
			mu.Lock()
			out[s.pod] = v.Stats
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// monitoringCost prints the controller's requests to the servers'
// monitoring ports per server per 30 s, by path and in all.
func (b *bench) monitoringCost(label string, srv []server, before, after map[string]map[string]float64, elapsed time.Duration) {
	byPath := map[string]float64{}
	n := 0
	for _, s := range srv {
		bs, as := before[s.pod], after[s.pod]
		if bs == nil || as == nil {
			continue
		}
		n++
		for path, v := range as {
			d := v - bs[path]
			switch path {
			case "/varz":
				d-- // the benchmark's own read after the window
			case "/healthz":
				for _, every := range s.probeEvery {
					d -= elapsed.Seconds() / float64(every)
				}
			}
			byPath[path] += d
		}
	}
	if n == 0 {
		fmt.Printf("# %s: no server answered /varz\n", label)
		return
	}
	per30 := 30 / elapsed.Seconds() / float64(n)
	total := 0.0
	for _, path := range sortedKeysF(byPath) {
		figure(label+"_monitoring_"+strings.TrimPrefix(path, "/")+"_per_server_per_30s", round(byPath[path]*per30, 2), "requests")
		total += byPath[path]
	}
	figure(label+"_monitoring_requests_per_server_per_30s", round(total*per30, 2), "requests")
	fmt.Printf("# monitoring: /varz http_req_stats of %d servers before and after a window of %s; /healthz less the kubelet probes the pod spec runs in it (an estimate per server, exact on average)\n", n, elapsed.Round(time.Second))
}

func sortedKeysF(m map[string]float64) []string {
	im := map[string]int{}
	for k := range m {
		im[k] = 0
	}
	return sortedKeys(im)
}
