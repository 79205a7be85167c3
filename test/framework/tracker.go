package framework

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nats-operator/nats-operator/pkg/observe"
)

// Observation is what the test's own observer saw at one moment.
type Observation struct {
	At       time.Time
	Settled  bool
	Reason   string
	Silent   []string
	Versions map[string]string // server -> version, answered servers only
	// NotReady lists the servers whose pod is missing or not Ready.
	NotReady []string
}

// GateOpen reports whether the operator's gate would be open as far as an
// outsider can tell: Settled, every server answering and every pod Ready.
func (o Observation) GateOpen() bool {
	return o.Settled && len(o.Silent) == 0 && len(o.NotReady) == 0
}

// PodEvent is a pod seen for the first time, seen Ready for the first
// time, or seen being deleted.
type PodEvent struct {
	At       time.Time
	Pod      string
	UID      string
	Ready    bool
	Deleting bool
}

// Tracker watches a cluster independently of the operator: its own
// observe.Observer polls every server's monitoring endpoint, and a pod watch
// records every pod UID and when each pod's deletion started.
type Tracker struct {
	s         *Stack
	namespace string
	cluster   string
	servers   []string

	mu     sync.Mutex
	obs    []Observation
	events []PodEvent
	seen   map[string]bool // uid+deleting

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartTracker starts tracking the servers (e.g. demo-0, demo-1, demo-2).
func (s *Stack) StartTracker(ctx context.Context, namespace, cluster string, servers []string, every time.Duration) (*Tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	tr := &Tracker{s: s, namespace: namespace, cluster: cluster, servers: servers, seen: map[string]bool{}, cancel: cancel}
	w, err := s.Kube.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=" + cluster})
	if err != nil {
		cancel()
		return nil, err
	}
	tr.wg.Add(2)
	go func() {
		defer tr.wg.Done()
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error {
				continue
			}
			tr.recordPod(pod)
		}
	}()
	go func() {
		defer tr.wg.Done()
		o := observe.New(observe.Options{})
		defer o.Close()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			tr.observeOnce(ctx, o)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return tr, nil
}

func (tr *Tracker) recordPod(pod *corev1.Pod) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	uid := string(pod.UID)
	if !tr.seen[uid] {
		tr.seen[uid] = true
		tr.events = append(tr.events, PodEvent{At: time.Now(), Pod: pod.Name, UID: uid})
	}
	if PodReady(pod) && !tr.seen[uid+"/ready"] {
		tr.seen[uid+"/ready"] = true
		tr.events = append(tr.events, PodEvent{At: time.Now(), Pod: pod.Name, UID: uid, Ready: true})
	}
	if pod.DeletionTimestamp != nil && !tr.seen[uid+"/deleting"] {
		tr.seen[uid+"/deleting"] = true
		tr.events = append(tr.events, PodEvent{At: time.Now(), Pod: pod.Name, UID: uid, Deleting: true})
	}
}

func (tr *Tracker) observeOnce(ctx context.Context, o *observe.Observer) {
	target := observe.Target{Cluster: tr.namespace + "/" + tr.cluster}
	var notReady []string
	for _, srv := range tr.servers {
		addr := observe.ServerAddr{Name: srv}
		pod, err := tr.s.Kube.CoreV1().Pods(tr.namespace).Get(ctx, srv+"-0", metav1.GetOptions{})
		if err == nil {
			addr.Host = pod.Status.PodIP
		}
		if err != nil || !PodReady(pod) {
			notReady = append(notReady, srv)
		}
		target.Servers = append(target.Servers, addr)
	}
	snap := o.Observe(ctx, target)
	if ctx.Err() != nil {
		return
	}
	ob := Observation{At: time.Now(), Settled: snap.Verdict.Settled(), Reason: snap.Verdict.Reason, Versions: map[string]string{}, NotReady: notReady}
	for _, srv := range snap.Servers {
		if srv.Answered {
			ob.Versions[srv.Name] = srv.Version
		} else {
			ob.Silent = append(ob.Silent, srv.Name)
		}
	}
	tr.mu.Lock()
	tr.obs = append(tr.obs, ob)
	tr.mu.Unlock()
}

// Stop stops tracking.
func (tr *Tracker) Stop() {
	tr.cancel()
	tr.wg.Wait()
}

// Observations returns what the observer saw, in time order.
func (tr *Tracker) Observations() []Observation {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]Observation(nil), tr.obs...)
}

// Deletions returns the pods whose deletion started, in order.
func (tr *Tracker) Deletions() []PodEvent {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []PodEvent
	for _, e := range tr.events {
		if e.Deleting {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// RestartOrder returns the servers whose pod deletion started, in order
// (pod demo-2-0 is server demo-2).
func (tr *Tracker) RestartOrder() []string {
	var order []string
	for _, d := range tr.Deletions() {
		order = append(order, strings.TrimSuffix(d.Pod, "-0"))
	}
	return order
}

// ReadyAfter returns when a pod of that name other than uid was first seen
// Ready after t, and whether one was.
func (tr *Tracker) ReadyAfter(pod, uid string, t time.Time) (time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, e := range tr.events {
		if e.Ready && e.Pod == pod && e.UID != uid && e.At.After(t) {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// UIDs returns every UID seen per pod name.
func (tr *Tracker) UIDs() map[string][]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string][]string{}
	seen := map[string]bool{}
	for _, e := range tr.events {
		if !seen[e.UID] {
			seen[e.UID] = true
			out[e.Pod] = append(out[e.Pod], e.UID)
		}
	}
	return out
}

// PodReady reports whether a pod is Ready and not being deleted.
func PodReady(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
