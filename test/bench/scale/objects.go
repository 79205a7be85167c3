package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	clusterlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

type bench struct {
	o    options
	env  *testenv.Env
	kube kubernetes.Interface
	nats versioned.Interface
	// clusters is a watch of every NatsCluster: the waits read it, so
	// that the bench's own looking is not a List of 100 NatsClusters
	// twice a second on the API server the controller shares.
	clusters clusterlisters.NatsClusterLister
	// pods times the phases of each cluster's pod in a version change.
	pods *podPhases
	// watched is when the watch of b.clusters first showed each cluster
	// with the version a change asks for, Progressing, and done.
	watched *watchTimes
}

// watchTimes records, per NatsCluster, when the bench's watches first
// showed it, after arm(version): with spec.version == version (against the
// cluster's own patch, how late the API server's watch events reach a
// client; the controller's informer is another such client), its first
// step (a server's StatefulSet template on version: the first write of the
// controller's restart step, which writes the template, the ConfigMap, then
// deletes the pod, and only then the status), Progressing=True, and done
// (up to date on version: Ready, Settled, every server on it). Each is
// taken as its watch event arrives, not when a wait next looks, so no time
// is late by the wait's period (500 ms and the controller's /metrics read
// of each look, before): a cluster's own rollout and the whole change are
// timed alike.
type watchTimes struct {
	mu                            sync.Mutex
	version                       string
	spec, step, progressing, done map[string]time.Time
}

func (s *watchTimes) arm(version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = version
	s.spec, s.step, s.progressing, s.done = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
}

// recordStatefulSetAt takes the time of a cluster's first step: one of its
// servers' StatefulSets with a container on the armed version's image.
func (s *watchTimes) recordStatefulSetAt(sts *appsv1.StatefulSet, now time.Time) {
	cluster, ok := sts.Labels[clusterv1beta1.LabelCluster]
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == "" {
		return
	}
	on := false
	for _, c := range sts.Spec.Template.Spec.Containers {
		img, _, _ := strings.Cut(c.Image, "@")
		on = on || strings.HasSuffix(img, ":"+s.version)
	}
	firstAt(s.step, sts.Namespace+"/"+cluster, now, on)
}

// record takes the times an object's watch event shows: a NatsCluster's
// (recordAt), a server's StatefulSet's (recordStatefulSetAt).
func (s *watchTimes) record(obj interface{}) {
	switch o := obj.(type) {
	case *clusterv1beta1.NatsCluster:
		s.recordAt(o, time.Now())
	case *appsv1.StatefulSet:
		s.recordStatefulSetAt(o, time.Now())
	}
}

func (s *watchTimes) recordAt(nc *clusterv1beta1.NatsCluster, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == "" {
		return
	}
	key := nc.Namespace + "/" + nc.Name
	firstAt(s.spec, key, now, nc.Spec.Version == s.version)
	if _, done := s.done[key]; !done {
		firstAt(s.progressing, key, now, meta.IsStatusConditionTrue(nc.Status.Conditions, clusterv1beta1.ConditionProgressing))
	}
	firstAt(s.done, key, now, upToDate(nc, s.version) == nil)
}

// firstAt sets m[key] to now when cond holds and m has no time for key.
func firstAt(m map[string]time.Time, key string, now time.Time, cond bool) {
	if _, ok := m[key]; !ok && cond {
		m[key] = now
	}
}

// upToDate is nil when nc runs version (spec and status) and is Ready and
// Settled on its target, else what is not.
func upToDate(nc *clusterv1beta1.NatsCluster, version string) error {
	if err := framework.CheckSettledUpToDate(nc); err != nil {
		return err
	}
	if nc.Spec.Version != version || nc.Status.Version != version {
		return fmt.Errorf("spec.version %s, status.version %s, not %s", nc.Spec.Version, nc.Status.Version, version)
	}
	return nil
}

// handler records the NatsClusters' and the StatefulSets' events.
func (s *watchTimes) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    s.record,
		UpdateFunc: func(_, obj interface{}) { s.record(obj) },
	}
}

// times returns copies of the times recorded since arm.
func (s *watchTimes) times() watched {
	s.mu.Lock()
	defer s.mu.Unlock()
	return watched{spec: maps.Clone(s.spec), step: maps.Clone(s.step), progressing: maps.Clone(s.progressing), done: maps.Clone(s.done)}
}

// watched are the times of a watchTimes, by cluster (namespace/name).
type watched struct {
	spec, step, progressing, done map[string]time.Time
}

// doneCount is how many clusters were seen done since arm.
func (s *watchTimes) doneCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.done)
}

// neverScheduled is the nodeSelector of the unrelated pods: no node has the
// label, so they stay Pending and nothing runs for them.
var neverScheduled = map[string]string{"bench.nats-operator.io/never-scheduled": "true"}

// secretBytes is the size of each unrelated Secret's value.
const secretBytes = 50 * 1000

func otherNamespace(i int) string { return fmt.Sprintf("bench-other-%d", i) }

func (b *bench) createNamespace(ctx context.Context, name string, labels map[string]string) error {
	_, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createUnrelated creates o.objects objects the controller has nothing to do
// with: 40% ConfigMaps, 20% Secrets of 50 kB, 40% Pods that stay Pending.
func (b *bench) createUnrelated(ctx context.Context) error {
	n := b.o.objects
	cms, secrets := n*4/10, n*2/10
	pods := n - cms - secrets
	figure("unrelated_configmaps", cms, "objects")
	figure("unrelated_secrets_50kB", secrets, "objects")
	figure("unrelated_pods_pending", pods, "objects")
	fmt.Println("# unrelated pods: nodeSelector bench.nats-operator.io/never-scheduled=true, which no node matches: they stay Pending (Unschedulable)")
	for i := range b.o.namespaces {
		if err := b.createNamespace(ctx, otherNamespace(i), nil); err != nil {
			return err
		}
	}
	say("creating %d ConfigMaps, %d Secrets of 50 kB, %d Pods in %d namespaces", cms, secrets, pods, b.o.namespaces)
	start := time.Now()
	value := []byte(strings.Repeat("x", secretBytes))
	data := map[string]string{"app.properties": strings.Repeat("key=value\n", 50)}
	type job struct {
		kind string
		i    int
	}
	jobs := make(chan job)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range 16 {
		wg.Go(func() {
			for j := range jobs {
				ns := otherNamespace(j.i % b.o.namespaces)
				meta := metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", j.kind, j.i), Namespace: ns, Labels: map[string]string{"app": "unrelated"}}
				var err error
				switch j.kind {
				case "cm":
					_, err = b.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: data}, metav1.CreateOptions{})
				case "secret":
					_, err = b.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"blob": value}}, metav1.CreateOptions{})
				case "pod":
					_, err = b.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
						NodeSelector:                  neverScheduled,
						TerminationGracePeriodSeconds: ptr.To[int64](0),
						Containers:                    []corev1.Container{{Name: "app", Image: "registry.example/unrelated:1"}},
					}}, metav1.CreateOptions{})
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("creating %s %s/%s: %w", j.kind, ns, meta.Name, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range []struct {
		kind string
		n    int
	}{{"cm", cms}, {"secret", secrets}, {"pod", pods}} {
		for i := range k.n {
			select {
			case jobs <- job{k.kind, i}:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	say("created %d unrelated objects in %s", n, time.Since(start).Round(time.Second))
	return ctx.Err()
}
