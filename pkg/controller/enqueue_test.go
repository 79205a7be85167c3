package controller

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A server's pod event (Ready, a failed probe, a restart, a delete)
// enqueues its NatsCluster: its controller is the StatefulSet, so the
// owner handler alone would not. A pod of another StatefulSet's cluster
// that does not exist, or without the label, enqueues nothing.
func TestAPodEventEnqueuesItsCluster(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	kube := k8sfake.NewClientset()
	nats := natsfake.NewSimpleClientset(nc)
	inf := testInformers(kubeinformers.NewSharedInformerFactory(kube, 0), natsinformers.NewSharedInformerFactory(nats, 0))
	c := New(context.Background(), Options{KubeClient: kube, NatsClient: nats, Informers: inf, Metrics: NewMetrics(prometheus.NewRegistry())})
	if err := inf.Clusters.Informer().GetIndexer().Add(nc); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1", UID: "sts"}}
	pod := func(cluster string, owned bool) runtime.Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1-0", Labels: map[string]string{}}}
		if cluster != "" {
			p.Labels = render.ClusterLabels(cluster)
		}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		obj  interface{}
		want int
	}{
		{"a server's pod", pod("demo", true), 1},
		{"a server's pod, deleted (a tombstone)", cache.DeletedFinalStateUnknown{Key: "ns/demo-1-0", Obj: pod("demo", true)}, 1},
		{"a pod of a cluster that does not exist", pod("other", true), 0},
		{"a pod without the cluster label", pod("", true), 0},
		{"a pod no StatefulSet controls", pod("demo", false), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for c.queue.Len() > 0 {
				k, _ := c.queue.Get()
				c.queue.Done(k)
			}
			c.enqueuePodsCluster(tc.obj)
			if got := c.queue.Len(); got != tc.want {
				t.Fatalf("queue length %d, want %d", got, tc.want)
			}
			if tc.want == 1 {
				k, _ := c.queue.Get()
				c.queue.Done(k)
				if k != (cache.ObjectName{Namespace: "ns", Name: "demo"}) {
					t.Errorf("enqueued %v, want ns/demo", k)
				}
			}
		})
	}
}
