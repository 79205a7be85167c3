package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// Two NatsClusters with gateways take turns through the supercluster
// Lease: the first to restart a server takes it, the second waits with the
// holder named, the holder keeps it while it rolls out and gives it up
// once up to date, and then the second takes it. A turn not renewed for
// the Lease's duration (a controller that died) is taken over.
func TestSuperclusterMembersTakeTurns(t *testing.T) {
	ctx := context.Background()
	kube := k8sfake.NewClientset()
	c := &Controller{kubeClient: kube, leaseNamespace: "nats-system", metrics: NewMetrics(prometheus.NewRegistry())}
	east := rendertest.NewCluster("east", "east", rendertest.Gateway(rendertest.GatewayTo("west", "west")))
	west := rendertest.NewCluster("west", "west", rendertest.Gateway(rendertest.GatewayTo("east", "east")))
	rolling := rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonRollingRestart}}
	upToDate := rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonUpToDate}}

	if err := c.superclusterTurn(ctx, east, "east-2"); err != nil {
		t.Fatalf("east's first restart: %v", err)
	}
	err := c.superclusterTurn(ctx, west, "west-2")
	var wait *superclusterWaitError
	if !errors.As(err, &wait) || wait.holder != "east/east" {
		t.Fatalf("west's restart while east rolls: %v, want a wait naming east/east", err)
	}
	t.Logf("west waits: %v", err)
	if err := c.superclusterTurn(ctx, east, "east-1"); err != nil {
		t.Fatalf("east's next restart, its turn held: %v", err)
	}
	c.superclusterKeep(ctx, east, rolling)
	if !errors.As(c.superclusterTurn(ctx, west, "west-2"), &wait) {
		t.Fatal("west restarted while east still rolls out")
	}
	c.superclusterKeep(ctx, west, rolling) // west holds nothing: no effect
	c.superclusterKeep(ctx, east, upToDate)
	if err := c.superclusterTurn(ctx, west, "west-2"); err != nil {
		t.Fatalf("west's restart once east is up to date: %v", err)
	}
	if !errors.As(c.superclusterTurn(ctx, east, "east-2"), &wait) || wait.holder != "west/west" {
		t.Fatal("east restarted while west rolls out")
	}

	// west's controller dies: its turn, not renewed, expires.
	l, err := kube.CoordinationV1().Leases("nats-system").Get(ctx, SuperclusterLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-superclusterLeaseDuration - time.Second))
	l.Spec.RenewTime = &old
	if _, err := kube.CoordinationV1().Leases("nats-system").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.superclusterTurn(ctx, east, "east-2"); err != nil {
		t.Fatalf("east's restart after west's turn expired: %v", err)
	}
	// A Lease the API server refuses: the step waits with its words.
	kube.PrependReactor("get", "leases", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, SuperclusterLeaseName, errors.New("RBAC says no"))
	})
	err = c.superclusterTurn(ctx, west, "west-2")
	if !errors.As(err, &wait) || wait.failure == "" {
		t.Fatalf("a forbidden Lease: %v, want a wait with the API server's words", err)
	}
	t.Logf("refused: %v", err)
	if !restarts(&rollout.Step{Kind: rollout.RemoveServer}) || restarts(&rollout.Step{Kind: rollout.Reload}) {
		t.Error("a removal stops a server and takes a turn; a reload does not")
	}
}
