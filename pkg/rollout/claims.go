package rollout

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Growing claims in place. A larger storage request in the claim template,
// on a storage class that allows expansion, is applied to each server's
// PersistentVolumeClaim, one server at a time, highest ordinal first: an
// ExpandClaim step raises the claim's request, then the planner waits
// (ExpandingStorage) until the claim reports the new capacity (the storage
// class grows the volume, the kubelet the filesystem) before the next. No
// pod restarts, and no gate is needed: nothing stops. The StatefulSet's
// claim template keeps the old size (it cannot change); a server created
// later gets the new one. The config's derived max_file_store follows by
// the rollout that comes after (a raised limit reloads).

// expandClaims takes the next expansion, or waits for the one in flight;
// false when no claim grows.
func (p *planner) expandClaims() (Decision, bool) {
	var next *ServerState
	for i := len(p.servers) - 1; i >= 0; i-- {
		s := &p.servers[i]
		if !s.Created || s.ClaimExpansion == nil {
			continue
		}
		if s.ClaimExpansion.Requested {
			return p.expanding(s, "waiting for the volume to grow: "+s.ClaimExpansion.Progress, nil), true
		}
		if next == nil {
			next = s
		}
	}
	if next == nil {
		return Decision{}, false
	}
	return p.expanding(next, "raising its claim's storage request", &Step{Kind: ExpandClaim, Expand: &ExpandClaimStep{Server: next.Name}}), true
}

func (p *planner) expanding(s *ServerState, what string, step *Step) Decision {
	msg := fmt.Sprintf("growing the claim of %s to %s in place, one server at a time, no restart: %s", s.Name, s.ClaimExpansion.Size, what)
	d := Decision{Step: step, Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonExpandingStorage, msg)}
	if step == nil {
		d.Hold = &Hold{Reason: clusterv1beta1.ReasonExpandingStorage, Message: msg}
	}
	return p.decision(d)
}
