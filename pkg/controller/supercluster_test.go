package controller

import (
	"context"
	"errors"
	"slices"
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
	members := superclusterOf("east/east", []*clusterv1beta1.NatsCluster{east, west})
	if len(members) != 2 {
		t.Fatalf("east's supercluster is %v, want east and west", members)
	}
	rolling := rollout.Decision{KeepsTurn: true, Progressing: metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonRollingRestart}}
	upToDate := rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonUpToDate}}

	if err := c.superclusterTurn(ctx, east, members, "east-2"); err != nil {
		t.Fatalf("east's first restart: %v", err)
	}
	err := c.superclusterTurn(ctx, west, members, "west-2")
	var wait *superclusterWaitError
	if !errors.As(err, &wait) || wait.holder != "east/east" {
		t.Fatalf("west's restart while east rolls: %v, want a wait naming east/east", err)
	}
	t.Logf("west waits: %v", err)
	if err := c.superclusterTurn(ctx, east, members, "east-1"); err != nil {
		t.Fatalf("east's next restart, its turn held: %v", err)
	}
	c.superclusterKeep(ctx, east, members, rolling)
	if !errors.As(c.superclusterTurn(ctx, west, members, "west-2"), &wait) {
		t.Fatal("west restarted while east still rolls out")
	}
	c.superclusterKeep(ctx, west, members, rolling) // west holds nothing: no effect
	c.superclusterKeep(ctx, east, members, upToDate)
	if err := c.superclusterTurn(ctx, west, members, "west-2"); err != nil {
		t.Fatalf("west's restart once east is up to date: %v", err)
	}
	if !errors.As(c.superclusterTurn(ctx, east, members, "east-2"), &wait) || wait.holder != "west/west" {
		t.Fatal("east restarted while west rolls out")
	}

	// west's controller dies: its turn, not renewed, expires.
	l, err := kube.CoordinationV1().Leases("nats-system").Get(ctx, SuperclusterLeaseName(members), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-superclusterLeaseDuration - time.Second))
	l.Spec.RenewTime = &old
	if _, err := kube.CoordinationV1().Leases("nats-system").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.superclusterTurn(ctx, east, members, "east-2"); err != nil {
		t.Fatalf("east's restart after west's turn expired: %v", err)
	}
	// A Lease the API server refuses: the step waits with its words.
	kube.PrependReactor("get", "leases", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, SuperclusterLeaseName(members), errors.New("RBAC says no"))
	})
	err = c.superclusterTurn(ctx, west, members, "west-2")
	if !errors.As(err, &wait) || wait.failure == "" {
		t.Fatalf("a forbidden Lease: %v, want a wait with the API server's words", err)
	}
	t.Logf("refused: %v", err)
	if !restarts(&rollout.Step{Kind: rollout.RemoveServer}) || restarts(&rollout.Step{Kind: rollout.Reload}) {
		t.Error("a removal stops a server and takes a turn; a reload does not")
	}
}

// Superclusters that do not reach each other take turns on Leases of their
// own: a member of one rolling out never makes a member of the other wait,
// and a member that reaches another only through a third shares their
// Lease. A remote naming a cluster without a gateway joins nothing.
func TestSuperclustersThatDoNotReachEachOtherDoNotWait(t *testing.T) {
	ctx := context.Background()
	kube := k8sfake.NewClientset()
	c := &Controller{kubeClient: kube, leaseNamespace: "nats-system", metrics: NewMetrics(prometheus.NewRegistry())}
	a1 := rendertest.NewCluster("tenant-a", "a1", rendertest.Gateway(rendertest.GatewayTo("tenant-a", "a2")))
	a2 := rendertest.NewCluster("tenant-a", "a2", rendertest.Gateway())
	a3 := rendertest.NewCluster("tenant-a", "a3", rendertest.Gateway(rendertest.GatewayTo("tenant-a", "a2")))
	b1 := rendertest.NewCluster("tenant-b", "b1", rendertest.Gateway(rendertest.GatewayTo("tenant-b", "b2"), rendertest.GatewayTo("tenant-b", "plain")))
	b2 := rendertest.NewCluster("tenant-b", "b2", rendertest.Gateway(rendertest.GatewayTo("tenant-b", "b1")))
	plain := rendertest.NewCluster("tenant-b", "plain")
	all := []*clusterv1beta1.NatsCluster{a1, a2, a3, b1, b2, plain}
	a, b := superclusterOf("tenant-a/a3", all), superclusterOf("tenant-b/b2", all)
	if want := []string{"tenant-a/a1", "tenant-a/a2", "tenant-a/a3"}; !slices.Equal(a, want) {
		t.Errorf("a3's supercluster is %v, want %v (a1 and a3 reach each other through a2)", a, want)
	}
	if want := []string{"tenant-b/b1", "tenant-b/b2"}; !slices.Equal(b, want) {
		t.Errorf("b2's supercluster is %v, want %v (plain has no gateway)", b, want)
	}
	if SuperclusterLeaseName(a) == SuperclusterLeaseName(b) {
		t.Fatalf("both superclusters take turns on %s", SuperclusterLeaseName(a))
	}
	if err := c.superclusterTurn(ctx, a1, a, "a1-2"); err != nil {
		t.Fatal(err)
	}
	if err := c.superclusterTurn(ctx, b1, b, "b1-2"); err != nil {
		t.Fatalf("b1 waits for tenant a's supercluster: %v", err)
	}
	var wait *superclusterWaitError
	if err := c.superclusterTurn(ctx, a3, a, "a3-0"); !errors.As(err, &wait) || wait.holder != "tenant-a/a1" {
		t.Fatalf("a3 restarts while a1 of its supercluster rolls out: %v", err)
	}
	l, err := kube.CoordinationV1().Leases("nats-system").Get(ctx, SuperclusterLeaseName(a), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[AnnotationSuperclusterMembers]; got != "tenant-a/a1,tenant-a/a2,tenant-a/a3" {
		t.Errorf("the Lease %s lists members %q", l.Name, got)
	}
	// a1 is blocked (its Decision keeps no turn): it gives its turn up,
	// and a3 goes on.
	c.superclusterKeep(ctx, a1, a, rollout.Decision{KeepsTurn: false, Progressing: metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonGateBlocked}})
	if err := c.superclusterTurn(ctx, a3, a, "a3-0"); err != nil {
		t.Fatalf("a3 waits for a1, which gave up its turn: %v", err)
	}
}
