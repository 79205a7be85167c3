package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// TestEveryStepKindHasAnExecutor: executeStep takes every kind the planner
// has (rollout.StepKinds; here without a payload, which each executor
// refuses in its own words or takes as nothing to do), and refuses a kind
// it does not know. A new kind fails here until it is executed (doc.go).
func TestEveryStepKindHasAnExecutor(t *testing.T) {
	if len(rollout.StepKinds) < 5 {
		t.Fatalf("rollout.StepKinds has %d kinds; the check would prove nothing", len(rollout.StepKinds))
	}
	ctx := context.Background()
	kube, nats := k8sfake.NewClientset(), natsfake.NewSimpleClientset()
	inf := testInformers(kubeinformers.NewSharedInformerFactory(kube, 0), natsinformers.NewSharedInformerFactory(nats, 0))
	c := New(ctx, Options{KubeClient: kube, NatsClient: nats, Informers: inf, Metrics: NewMetrics(prometheus.NewRegistry())})
	c.recorder = record.NewFakeRecorder(100)
	p := &plan{facts: &facts{nc: rt.NewCluster("ns", "demo")}, out: &render.Output{Revision: "r"}}
	const unknown = "which this controller does not execute"
	for _, k := range rollout.StepKinds {
		if err := c.executeStep(ctx, p, &rollout.Step{Kind: k}, ""); err != nil && strings.Contains(err.Error(), unknown) {
			t.Errorf("%s: %v", k, err)
		}
	}
	if err := c.executeStep(ctx, p, &rollout.Step{Kind: "Teleport"}, ""); err == nil || !strings.Contains(err.Error(), unknown) {
		t.Errorf("an unknown step kind: %v, want it refused", err)
	}
}
