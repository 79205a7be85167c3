package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
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

// GateOpen reports whether the controller's gate would be open as far as an
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

// Tracker watches a cluster independently of the controller: its own
// observe.Observer polls every server's monitoring endpoint, and a pod
// informer (list, then watch from the list's resourceVersion, listing again
// when the watch expires) records every pod UID and when each pod became
// Ready and when its deletion started.
type Tracker struct {
	s         *Stack
	namespace string
	cluster   string
	servers   []string

	mu     sync.Mutex
	obs    []Observation
	events []PodEvent
	seen   map[string]bool // uid+deleting

	pods   informers.SharedInformerFactory // runs the pod informer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartTracker starts tracking the servers (e.g. demo-0, demo-1, demo-2).
// It returns once the cluster's current pods are recorded, so a change made
// after it returns is seen against them; the observer's first poll may
// still be under way.
func (s *Stack) StartTracker(ctx context.Context, namespace, cluster string, servers []string, every time.Duration) (*Tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	tr := &Tracker{s: s, namespace: namespace, cluster: cluster, servers: servers, seen: map[string]bool{}, cancel: cancel}
	tr.pods = informers.NewSharedInformerFactoryWithOptions(s.Kube, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = "cluster.nats-operator.io/cluster=" + cluster
		}))
	reg, err := tr.pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    tr.recordPodObject,
		UpdateFunc: func(_, obj any) { tr.recordPodObject(obj) },
		DeleteFunc: tr.recordPodObject,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	tr.pods.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		cancel()
		tr.pods.Shutdown()
		return nil, fmt.Errorf("listing the pods of NatsCluster %s/%s: %w", namespace, cluster, context.Cause(ctx))
	}
	tr.wg.Add(1)
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

// recordPodObject records a pod from the informer, also one whose deletion
// the watch missed (a tombstone).
func (tr *Tracker) recordPodObject(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		tr.recordPod(pod)
	}
}

func (tr *Tracker) recordPod(pod *corev1.Pod) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	uid := string(pod.UID)
	if !tr.seen[uid] {
		tr.seen[uid] = true
		tr.events = append(tr.events, PodEvent{At: time.Now(), Pod: pod.Name, UID: uid})
	}
	if kubeutil.PodReady(pod) && !tr.seen[uid+"/ready"] {
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
		if err != nil || !kubeutil.PodReady(pod) {
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

// Stop stops tracking; calling it again does nothing.
func (tr *Tracker) Stop() {
	tr.cancel()
	tr.pods.Shutdown()
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
