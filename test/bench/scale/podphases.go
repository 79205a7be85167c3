package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// podPhases times, per NatsCluster of one server, what happens to its pod
// during a version change, from the pod events the bench watches: when its
// deletion was asked (the controller's step), when the old pod was gone
// (the local node ran the preStop and the process exited), when the new pod
// was created (the kube-controller-manager's StatefulSet controller), and
// when it was Ready (the local node started the process and probed it).
// Together with when the cluster was seen up to date, they split a
// cluster's rollout into what the controller did and what the test bed did.
type podPhases struct {
	mu    sync.Mutex
	armed bool
	at    map[string]*podTimes // by namespace/cluster
}

type podTimes struct {
	deleting, gone, created, ready time.Time
}

func newPodPhases() *podPhases { return &podPhases{at: map[string]*podTimes{}} }

// arm forgets what was recorded and records the first of each phase from
// now on.
func (p *podPhases) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	p.at = map[string]*podTimes{}
}

func (p *podPhases) record(obj interface{}, set func(t *podTimes, now time.Time)) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[clusterv1beta1.LabelCluster] == "" {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return
	}
	key := pod.Namespace + "/" + pod.Labels[clusterv1beta1.LabelCluster]
	t := p.at[key]
	if t == nil {
		t = &podTimes{}
		p.at[key] = t
	}
	set(t, now)
}

func first(t *time.Time, now time.Time) {
	if t.IsZero() {
		*t = now
	}
}

// handler is the pod informer's event handler.
func (p *podPhases) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			p.record(obj, func(t *podTimes, now time.Time) { first(&t.created, now) })
		},
		UpdateFunc: func(_, obj interface{}) {
			pod := obj.(*corev1.Pod)
			p.record(obj, func(t *podTimes, now time.Time) {
				if pod.DeletionTimestamp != nil {
					first(&t.deleting, now)
					return
				}
				if !t.created.IsZero() && podReady(pod) {
					first(&t.ready, now)
				}
			})
		},
		DeleteFunc: func(obj interface{}) {
			p.record(obj, func(t *podTimes, now time.Time) {
				first(&t.deleting, now) // a deletion without grace period is seen only here
				first(&t.gone, now)
			})
		},
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// phase is one phase's durations over the clusters that went through it.
type phase struct {
	name string
	d    []time.Duration
}

// phases splits each cluster's change, from start to done (when the bench
// saw it up to date), into: step (start to the pod's deletion: the patch
// and the controller's step), termination (to the old pod gone), recreate
// (to the new pod created), start (to it Ready) and report (to the cluster
// seen up to date: the controller's observation and status, and the
// bench's 500 ms look). Clusters missing a phase are left out of it.
func (p *podPhases) phases(start time.Time, done map[string]time.Time) []phase {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := []phase{{name: "step"}, {name: "termination"}, {name: "recreate"}, {name: "start"}, {name: "report"}}
	for key, t := range p.at {
		marks := []time.Time{start, t.deleting, t.gone, t.created, t.ready, done[key]}
		for i := range ps {
			if marks[i].IsZero() || marks[i+1].IsZero() {
				continue
			}
			ps[i].d = append(ps[i].d, marks[i+1].Sub(marks[i]))
		}
	}
	for i := range ps {
		slices.Sort(ps[i].d)
	}
	return ps
}

// describe is when, from start, cluster key's pod was asked to go, was
// gone, was created again and was Ready, and when the cluster was seen
// done.
func (p *podPhases) describe(key string, start, done time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.at[key]
	if t == nil {
		t = &podTimes{}
	}
	return fmt.Sprintf("pod deleting %s, gone %s, created %s, Ready %s; up to date %s",
		sinceStart(start, t.deleting), sinceStart(start, t.gone), sinceStart(start, t.created),
		sinceStart(start, t.ready), sinceStart(start, done))
}

// sinceStart is when m was, from start ("1.23 s"), or "not seen" for a
// zero m.
func sinceStart(start, m time.Time) string {
	if m.IsZero() {
		return "not seen"
	}
	return fmt.Sprintf("%.2f s", m.Sub(start).Seconds())
}

// quantile of sorted durations (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}
