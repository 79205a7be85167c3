package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	clusterlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/cluster/v1beta1"
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
	// specSeen is when the watch of b.clusters first showed each cluster
	// with the version a change asks for.
	specSeen *specSeen
}

// specSeen records, per NatsCluster, when the bench's watch first showed
// it with spec.version == version: against the cluster's own patch, how
// late the API server's watch events reach a client (the controller's
// informer is another such client).
type specSeen struct {
	mu      sync.Mutex
	version string
	at      map[string]time.Time
}

func (s *specSeen) arm(version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.at = version, map[string]time.Time{}
}

func (s *specSeen) record(obj interface{}) {
	nc, ok := obj.(*clusterv1beta1.NatsCluster)
	if !ok {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	key := nc.Namespace + "/" + nc.Name
	if _, seen := s.at[key]; !seen && s.version != "" && nc.Spec.Version == s.version {
		s.at[key] = now
	}
}

func (s *specSeen) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    s.record,
		UpdateFunc: func(_, obj interface{}) { s.record(obj) },
	}
}

// seenAt is when key was first seen with the armed version.
func (s *specSeen) seenAt(key string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[key]
	return t, ok
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
