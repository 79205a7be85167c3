package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// Events are written with Options.EventClient, whose client-side rate
// limit is not the one the steps' requests wait on; the step's client
// writes none.
func TestEventsAreWrittenWithTheirOwnClient(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	kube, events := k8sfake.NewClientset(), k8sfake.NewClientset()
	nats := natsfake.NewSimpleClientset(nc)
	inf := testInformers(kubeinformers.NewSharedInformerFactory(kube, 0), natsinformers.NewSharedInformerFactory(nats, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(ctx, Options{KubeClient: kube, EventClient: events, NatsClient: nats, Informers: inf, Metrics: NewMetrics(prometheus.NewRegistry())})
	c.recorder.Event(nc, corev1.EventTypeNormal, "Test", "an Event")
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := events.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].Reason == "Test" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Event client holds %d Events after 30 s, want the one recorded", len(list.Items))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "events" {
			t.Errorf("the step's client wrote an Event: %v", a)
		}
	}
}
