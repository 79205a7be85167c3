package rollout

import (
	"slices"
	"strings"
	"testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// standaloneToThree is one standalone JetStream server (no cluster name)
// scaled to three: its own target is the clustered config, and the added
// servers are not created yet.
func standaloneToThree(opts ...opt) Input {
	in := scaledUp(1, 3, opts...)
	in.Target.ClusterName = "demo"
	in.Servers[0].Running.ClusterName = ""
	in.Servers[0].TargetConfigRevision = "clustered-0"
	return in
}

// One JetStream server scaled to three is held with StandaloneChangeBlocked
// before the standalone server is restarted (the added servers are created,
// as for any scale-up with a change the running servers need; they form
// their meta group without it): the standalone server's streams
// would be deleted as orphans once the cluster forms (the matrix's
// TestStandaloneServerJoiningACluster). restart-all completes it; with
// streams, only with reset-jetstream. And back: three scaled to one holds
// the same way.
func TestOneStandaloneServerBecomingAClusterIsHeld(t *testing.T) {
	d := Plan(standaloneToThree())
	if d.Hold == nil || d.Progressing.Reason != clusterv1beta1.ReasonStandaloneChangeBlocked || d.Step != nil {
		t.Fatalf("Plan: hold %+v, reason %s, step %+v, create %v", d.Hold, d.Progressing.Reason, d.Step, d.Create)
	}
	t.Logf("held: %s", d.Progressing.Message)
	if !strings.Contains(d.Progressing.Message, "orphans") || !strings.Contains(d.Progressing.Message, "restart-all") {
		t.Errorf("the message does not say why or the way out: %s", d.Progressing.Message)
	}

	// With streams, restart-all alone is not enough.
	withStreams := standaloneToThree(streams(StreamRef{Account: "$G", Name: "ORDERS"}), annotate(clusterv1beta1.AnnotationRestartAll, "true"))
	d = Plan(withStreams)
	if d.Step != nil || d.Hold == nil {
		t.Fatalf("restart-all with a stream on the standalone server: step %+v, hold %+v", d.Step, d.Hold)
	}
	t.Logf("restart-all with streams: %s: %s", d.Progressing.Reason, d.Progressing.Message)
	if !strings.Contains(d.Progressing.Message, "ORDERS") || !strings.Contains(d.Progressing.Message, "reset-jetstream") {
		t.Errorf("the hold does not name the stream and reset-jetstream: %s", d.Progressing.Message)
	}

	// Without streams restart-all restarts the server and creates the rest.
	d = Plan(standaloneToThree(annotate(clusterv1beta1.AnnotationRestartAll, "true")))
	if d.Step == nil && len(d.Create) == 0 {
		t.Fatalf("restart-all without streams does nothing: %s: %s", d.Progressing.Reason, d.Progressing.Message)
	}
	t.Logf("restart-all without streams: step %+v, create %v", d.Step, d.Create)

	// Three to one.
	down := cluster(1)
	down.Servers[0].Running.ClusterName = "demo"
	down.Target.ClusterName = ""
	down.Servers[0].TargetConfigRevision = "standalone-0"
	d = Plan(down)
	if d.Progressing.Reason != clusterv1beta1.ReasonStandaloneChangeBlocked || d.Step != nil {
		t.Fatalf("a cluster becoming one standalone server: %s %+v", d.Progressing.Reason, d.Step)
	}
	if !slices.ContainsFunc(d.Changes, func(c Change) bool { return c.Kind == ChangeStandalone }) {
		t.Errorf("changes %v", d.Changes)
	}
}

// A standalone server has no meta group: a version change restarts it
// without waiting for a meta membership it can never have.
func TestAStandaloneServerIsRestartedWithoutAMetaGroup(t *testing.T) {
	in := cluster(1)
	in.Target.ClusterName = ""
	in.Servers[0].Running.ClusterName = ""
	in.Observation.MetaMembers = nil
	in.Observation.MetaLeader = ""
	in.Servers[0].TargetConfigRevision = "2.15.2-0"
	in.Target.Version = "2.15.2"
	d := Plan(in)
	if d.Step == nil || d.Step.Kind != RestartOne || d.Step.Servers[0] != "demo-0" {
		t.Fatalf("Plan: step %+v, %s: %s", d.Step, d.Progressing.Reason, d.Progressing.Message)
	}
	// A clustered server that is not in the meta group still waits.
	in.Target.ClusterName, in.Servers[0].Running.ClusterName = "demo", "demo"
	if d := Plan(in); d.Step != nil {
		t.Fatalf("a clustered server outside the meta group was stepped: %+v", d.Step)
	}
}
