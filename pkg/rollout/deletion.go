package rollout

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// deleting decides for a NatsCluster being deleted. Its finalizer
// (FinalizerStreams) stays while JetStream may hold streams, because the
// garbage collector would then delete every server with them:
//
//	force-delete set ────────────────────────> ReleaseFinalizer
//	observed, every server with objects
//	answered, no streams ────────────────────> ReleaseFinalizer
//	streams, or some unknown (not observed,
//	or a server silent) ─────────────────────> Hold Deleting (False), naming
//	                                           the streams or why they are unknown
//
// Never a step, and no server is created: a cluster being deleted only
// waits or goes. Deleting comes before Blocked, so a cluster whose spec
// cannot render is deletable too.
func deleting(in *Input) Decision {
	if _, ok := in.Annotations[clusterv1beta1.AnnotationForceDelete]; ok {
		return finish(Decision{
			ReleaseFinalizer: true,
			DeleteClaims:     in.DeleteClaims,
			Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonDeleting,
				fmt.Sprintf("deleting NatsCluster %s: %s is set", in.Cluster, clusterv1beta1.AnnotationForceDelete)),
		})
	}
	obs := in.Observation
	if obs.streamsKnown() && len(obs.Streams) == 0 {
		return finish(Decision{
			ReleaseFinalizer: true,
			DeleteClaims:     in.DeleteClaims,
			Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonDeleting,
				fmt.Sprintf("deleting NatsCluster %s: JetStream holds no streams", in.Cluster)),
		})
	}
	msg := deletingMessage(in.Cluster, obs, in.DeleteClaims)
	return finish(Decision{
		Hold:        &Hold{Reason: clusterv1beta1.ReasonDeleting, Message: msg, WaitingFor: clusterv1beta1.AnnotationForceDelete},
		Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonDeleting, msg),
	})
}

// deletingMessage is the message of a held deletion: "deleting NatsCluster
// demo waits: JetStream holds 2 streams ($G/ONE, $G/ORDERS); back them up or
// delete them, or annotate cluster.nats-operator.io/force-delete to delete
// the cluster and its servers anyway (the claims are kept)" (or "(and
// their claims: ...)" when they go too); when the
// cluster is not observed, "cannot tell whether JetStream holds streams
// (<why>)" in place of the streams.
func deletingMessage(cluster string, obs Observation, deleteClaims bool) string {
	what := ""
	switch {
	case obs.Observed && len(obs.Streams) > 0:
		streams := sortedStreams(obs.Streams)
		what = fmt.Sprintf("JetStream holds %d %s (%s)", len(streams), plural(len(streams), "stream", "streams"), nameStreams(streams))
		if !obs.streamsKnown() {
			what += ", and maybe more (" + obs.unknownWhy() + ")"
		}
	default:
		what = fmt.Sprintf("cannot tell whether JetStream holds streams (%s)", obs.unknownWhy())
	}
	claims := "the claims are kept"
	if deleteClaims {
		claims = "and their claims: spec.jetstream.volumeClaimTemplate.whenDeleted is Delete"
	}
	return fmt.Sprintf("deleting NatsCluster %s waits: %s; back them up or delete them, or annotate %s to delete the cluster and its servers anyway (%s)",
		cluster, what, clusterv1beta1.AnnotationForceDelete, claims)
}

// nameStreams names up to MaxNamedStreams streams as account/name, the way
// scale-down holds name them: "$G/ONE, $G/ORDERS", then "and N more".
func nameStreams(streams []StreamRef) string {
	shown := streams
	if len(shown) > MaxNamedStreams {
		shown = shown[:MaxNamedStreams]
	}
	names := make([]string, len(shown))
	for i, s := range shown {
		account := s.Account
		if account == "" {
			account = GlobalAccount
		}
		names[i] = account + "/" + s.Name
	}
	out := strings.Join(names, ", ")
	if more := len(streams) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}
