package rollout

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

func deletingCluster(in *Input) { in.Deleting = true }

func withStreams(streams ...StreamRef) opt {
	return func(in *Input) { in.Observation.Streams = streams }
}

func notObserved(in *Input) {
	in.Observation = Observation{Settled: Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed,
		Message: "no server answered"}}
}

func TestPlanGuardsTheDeletionOfAClusterHoldingStreams(t *testing.T) {
	orders, one := StreamRef{Account: GlobalAccount, Name: "ORDERS"}, StreamRef{Account: GlobalAccount, Name: "ONE"}
	var many []StreamRef
	for i := range 7 {
		many = append(many, StreamRef{Account: GlobalAccount, Name: fmt.Sprintf("S%d", i)})
	}
	tests := []struct {
		name    string
		in      Input
		release bool
		// waitingFor is the hold's (empty when released).
		waitingFor string
	}{
		{
			name:    "a cluster observed holding no streams is released",
			in:      cluster(3, deletingCluster),
			release: true,
		},
		{
			name:       "a cluster holding streams holds the deletion",
			in:         cluster(3, deletingCluster, withStreams(orders, one)),
			waitingFor: clusterv1beta1.AnnotationForceDelete,
		},
		{
			name:       "a cluster that cannot be observed holds the deletion: its streams are unknown",
			in:         cluster(3, deletingCluster, notObserved),
			waitingFor: clusterv1beta1.AnnotationForceDelete,
		},
		{
			name: "force-delete releases a cluster holding streams",
			in: cluster(3, deletingCluster, withStreams(orders), func(in *Input) {
				in.Annotations = map[string]string{clusterv1beta1.AnnotationForceDelete: "true"}
			}),
			release: true,
		},
		{
			name: "force-delete with an empty value releases too",
			in: cluster(3, deletingCluster, notObserved, func(in *Input) {
				in.Annotations = map[string]string{clusterv1beta1.AnnotationForceDelete: ""}
			}),
			release: true,
		},
		{
			name: "a cluster whose spec cannot render is deletable: deleting comes before blocked",
			in: cluster(3, deletingCluster, func(in *Input) {
				in.Blocked = &Blocked{Reason: clusterv1beta1.ReasonInvalidSpec, Message: "unknown access mode"}
			}),
			release: true,
		},
		{
			name:       "a blocked cluster holding streams holds with Deleting, not its blocked reason",
			in:         cluster(3, deletingCluster, withStreams(orders), func(in *Input) { in.Blocked = &Blocked{Reason: clusterv1beta1.ReasonTrustNotFound, Message: "x"} }),
			waitingFor: clusterv1beta1.AnnotationForceDelete,
		},
		{
			name: "a cluster being deleted creates no server and takes no step, though one is due",
			in: cluster(3, deletingCluster, withStreams(many...), func(in *Input) {
				in.Servers = append(in.Servers, ServerState{Name: "demo-3", Ordinal: 3})
				in.Annotations = map[string]string{clusterv1beta1.AnnotationRestartAll: "true", clusterv1beta1.AnnotationForceStep: "demo-2"}
			}),
			waitingFor: clusterv1beta1.AnnotationForceDelete,
		},
		{
			name:    "a cluster being scaled down is released without finishing the removal",
			in:      cluster(3, deletingCluster, func(in *Input) { in.ExtraServers = []ServerState{{Name: "demo-3", Ordinal: 3, Created: true}} }),
			release: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			if d.Step != nil || len(d.Create) > 0 || len(d.ClearAnnotations) > 0 || d.Rollout != nil || len(d.Removals) > 0 {
				t.Fatalf("step %+v, create %v, clear %v, rollout %+v, removals %v: a deletion only holds or releases",
					d.Step, d.Create, d.ClearAnnotations, d.Rollout, d.Removals)
			}
			if d.ReleaseFinalizer != tt.release {
				t.Fatalf("release %v, want %v (hold %+v)", d.ReleaseFinalizer, tt.release, d.Hold)
			}
			if d.Progressing.Status != metav1.ConditionFalse || d.Progressing.Reason != clusterv1beta1.ReasonDeleting {
				t.Errorf("Progressing %s %s, want False Deleting", d.Progressing.Status, d.Progressing.Reason)
			}
			if tt.release {
				if d.Hold != nil {
					t.Errorf("hold %+v with the finalizer released", d.Hold)
				}
				return
			}
			if d.Hold == nil || d.Hold.Reason != clusterv1beta1.ReasonDeleting || d.Hold.WaitingFor != tt.waitingFor || !d.Hold.Notify {
				t.Errorf("hold %+v, want a notifying Deleting hold waiting for %s", d.Hold, tt.waitingFor)
			}
			if d.Soon {
				t.Error("soon: a deletion held until the user acts is looked at again at the idle cadence")
			}
		})
	}
}

func TestNotifiesADeletionHold(t *testing.T) {
	if !Notifies(clusterv1beta1.ReasonDeleting) {
		t.Error("Notifies(Deleting) is false: the start and end of a held deletion would emit no Event")
	}
}

// Golden messages of a held deletion.
func TestDeletingMessageNamesTheStreamsAndTheWayOut(t *testing.T) {
	var seven []StreamRef
	for i := range 7 {
		seven = append(seven, StreamRef{Account: GlobalAccount, Name: fmt.Sprintf("S%d", i)})
	}
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{
			name: "two streams are named, sorted",
			in:   cluster(3, deletingCluster, withStreams(StreamRef{GlobalAccount, "ORDERS"}, StreamRef{GlobalAccount, "ONE"})),
			want: "deleting NatsCluster demo waits: JetStream holds 2 streams ($G/ONE, $G/ORDERS); back them up or delete them, or annotate cluster.nats-operator.io/force-delete to delete the cluster and its servers anyway (the claims are kept)",
		},
		{
			name: "beyond MaxNamedStreams the rest are counted",
			in:   cluster(3, deletingCluster, withStreams(seven...)),
			want: "deleting NatsCluster demo waits: JetStream holds 7 streams ($G/S0, $G/S1, $G/S2, $G/S3, $G/S4 and 2 more); back them up or delete them, or annotate cluster.nats-operator.io/force-delete to delete the cluster and its servers anyway (the claims are kept)",
		},
		{
			name: "an unobserved cluster says why its streams are unknown",
			in:   cluster(3, deletingCluster, notObserved),
			want: "deleting NatsCluster demo waits: cannot tell whether JetStream holds streams (no server answered); back them up or delete them, or annotate cluster.nats-operator.io/force-delete to delete the cluster and its servers anyway (the claims are kept)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tableCase(t, tt.in).Progressing.Message; got != tt.want {
				t.Errorf("message\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

// whenDeleted: Delete deletes the claims with the finalizer's release, and
// the hold says so; the default keeps them.
func TestDeletionDeletesClaimsOnlyWhenAskedTo(t *testing.T) {
	for _, del := range []bool{false, true} {
		empty := cluster(3, deletingCluster, func(in *Input) { in.DeleteClaims = del })
		if d := Plan(empty); !d.ReleaseFinalizer || d.DeleteClaims != del {
			t.Errorf("whenDeleted Delete=%v, empty cluster: release %v, delete claims %v", del, d.ReleaseFinalizer, d.DeleteClaims)
		}
		held := cluster(3, deletingCluster, streams(StreamRef{Account: GlobalAccount, Name: "ORDERS"}), func(in *Input) { in.DeleteClaims = del })
		d := Plan(held)
		want := "(the claims are kept)"
		if del {
			want = "(and their claims: spec.jetstream.volumeClaimTemplate.whenDeleted is Delete)"
		}
		if d.ReleaseFinalizer || d.DeleteClaims || !strings.HasSuffix(d.Progressing.Message, want) {
			t.Errorf("whenDeleted Delete=%v, held: release %v, delete claims %v, message %q, want it to end %q", del, d.ReleaseFinalizer, d.DeleteClaims, d.Progressing.Message, want)
		}
	}
}
