package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	"github.com/nats-operator/nats-operator/pkg/observe"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A worker decides and hands the writes on: while one NatsCluster's writes
// and report are not done (here: held at their end), the worker syncs the next cluster, and the first
// is not handed out again until its writes are done (then once, for the
// event that came meanwhile). Before, a worker held each cluster through
// its writes, and 100 clusters stepping at once started the last one's
// rollout only after every other's writes (issue 37).
func TestAWorkerDoesNotWaitForTheWrites(t *testing.T) {
	a, b := rt.NewCluster("a", "demo"), rt.NewCluster("b", "demo")
	kube := k8sfake.NewClientset()
	nats := natsfake.NewSimpleClientset(a, b)
	inf := testInformers(kubeinformers.NewSharedInformerFactory(kube, 0), natsinformers.NewSharedInformerFactory(nats, 0))
	c := New(context.Background(), Options{KubeClient: kube, NatsClient: nats, Informers: inf, Metrics: NewMetrics(prometheus.NewRegistry())})
	// The end of a sync's finish, after its writes: a's first waits there.
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var finished []string
	c.checkFacts = func(after, _ *facts) {
		mu.Lock()
		first := after.nc.Namespace == "a" && !slices.Contains(finished, "a")
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		mu.Lock()
		finished = append(finished, after.nc.Namespace)
		mu.Unlock()
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(finished)
	}
	c.observer = fakeObserver{&observe.Snapshot{Verdict: observe.Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "not observed"}}}
	for _, nc := range []*clusterv1beta1.NatsCluster{a, b} {
		if err := inf.Clusters.Informer().GetIndexer().Add(nc); err != nil {
			t.Fatal(err)
		}
	}
	ka, kb := cache.MetaObjectToName(a), cache.MetaObjectToName(b)
	ctx := context.Background()

	c.queue.Add(ka)
	returned := make(chan bool)
	go func() { returned <- c.processNextWorkItem(ctx) }()
	<-entered // a's writes are done, its finish waits
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker is still in a's sync while a's writes wait on the API server")
	}

	// An event of a while its writes go on, and b's first sync.
	c.queue.Add(ka)
	c.queue.Add(kb)
	if !c.processNextWorkItem(ctx) {
		t.Fatal("the queue shut down")
	}
	waitFor(t, func() bool { return len(got()) > 0 }, "b's sync")
	if f := got(); f[0] != "b" {
		t.Fatalf("syncs finished %v: the worker synced a again while a's writes were in flight", f)
	}
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("%d keys ready while a's writes are in flight, want 0 (a waits for them, b was synced)", n)
	}

	close(release)
	c.finishing.Wait()
	if f := got(); !slices.Equal(f, []string{"b", "a"}) {
		t.Fatalf("syncs finished %v, want [b a]", f)
	}
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("%d keys ready after a's writes, want 1 (a, for the event that came meanwhile)", n)
	}
	if key, _ := c.queue.Get(); key != ka {
		t.Fatalf("queued %v after a's writes, want %v", key, ka)
	}
}

// waitFor waits until done says so (the reactors run on the finish
// goroutines), failing after 30 s with what.
func waitFor(t *testing.T, done func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
