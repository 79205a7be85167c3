package rollout

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// upToDate is cluster(n) converged on the target, every server current in
// the meta group, the controller able to reach $SYS.
func upToDate(n int, opts ...opt) Input {
	all := make([]string, n)
	for i := range all {
		all[i] = "demo-" + string(rune('0'+i))
	}
	in := cluster(n, stepped(all...), converged(newRev), canReload, func(in *Input) { in.Observation.MetaCurrent = all })
	for _, o := range opts {
		o(&in)
	}
	return in
}

func replaceServer(name string) opt {
	return annotate(clusterv1beta1.AnnotationReplaceServer, name)
}

func rejoiningMark(name string) opt {
	return annotate(clusterv1beta1.AnnotationReplaceRejoining, name)
}

// spec changes a server of the spec.
func spec(name string, f func(*ServerState)) opt {
	return func(in *Input) { f(server(in, name)) }
}

var gone = func(s *ServerState) { *s = ServerState{Name: s.Name, Ordinal: s.Ordinal} }

func TestPlanReplaceServer(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		phase    clusterv1beta1.RemovalPhase // "" for no step
		removal  clusterv1beta1.RemovalPhase // status.removals; "" for none
		create   []string
		annotate map[string]string
		clear    []string
		reason   string
		status   metav1.ConditionStatus
		message  string
	}{
		{
			name:   "an R1 stream on the replaced server cannot move without taking the copies of a stream on every server: held, naming both",
			in:     upToDate(3, replaceServer("demo-1"), group("ORDERS", "demo-0", "demo-1", "demo-2"), group("ONE", "demo-1")),
			reason: clusterv1beta1.ReasonReplaceBlocked, status: metav1.ConditionFalse,
			message: "replacement held before demo-1: $G/ONE has a copy on demo-1 that must move first, but moving it ($JS.API.SERVER.EVACUATE) would also take demo-1's copies of $G/ORDERS, which has a replica on every server, and nats-server does not give them back: raise it to 3 replicas (nats stream edit <stream> --replicas 3) so it keeps a copy on every server, or add a server (spec.replicas 4); no server was changed by this hold",
		},
		{
			name:  "an R1 stream alone is moved",
			in:    upToDate(3, replaceServer("demo-1"), group("ONE", "demo-1")),
			phase: clusterv1beta1.RemovalEvacuating, removal: clusterv1beta1.RemovalEvacuating,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: moving its replicas of $G/ONE to the other servers",
		},
		{
			name:  "R3 on 5 servers is moved too",
			in:    upToDate(5, replaceServer("demo-1"), group("ORDERS", "demo-0", "demo-1", "demo-2")),
			phase: clusterv1beta1.RemovalEvacuating, removal: clusterv1beta1.RemovalEvacuating,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: moving its replicas of $G/ORDERS to the other servers",
		},
		{
			name:  "once only groups on every server list it, it is stopped, behind the gate",
			in:    upToDate(3, replaceServer("demo-1"), group("ORDERS", "demo-0", "demo-1", "demo-2")),
			phase: clusterv1beta1.RemovalStopping, removal: clusterv1beta1.RemovalStopping,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: stopping it ($G/ORDERS has a replica on every server and goes on without it)",
		},
		{
			name:    "the stop waits for the gate",
			in:      upToDate(3, replaceServer("demo-1"), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "ORDERS is catching up")),
			removal: clusterv1beta1.RemovalStopping,
			reason:  clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: stopping it; waiting for Settled: ORDERS is catching up",
		},
		{
			name:  "the replaced meta leader hands over first, to a server that stays",
			in:    upToDate(3, replaceServer("demo-0"), leader("demo-0")),
			phase: clusterv1beta1.RemovalSteppingDown, removal: clusterv1beta1.RemovalSteppingDown,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-0: handing JetStream meta leadership over",
		},
		{
			name:  "stopped: its objects are deleted, its peer kept for the new server to rejoin as",
			in:    upToDate(3, replaceServer("demo-1"), spec("demo-1", stoppedServer)),
			phase: clusterv1beta1.RemovalDeleting, removal: clusterv1beta1.RemovalDeleting,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: deleting its ConfigMap, claim and StatefulSet",
		},
		{
			name:  "stopped and out of the meta group: its objects are deleted",
			in:    upToDate(3, replaceServer("demo-1"), spec("demo-1", stoppedServer), metaMembers("demo-0", "demo-2")),
			phase: clusterv1beta1.RemovalDeleting, removal: clusterv1beta1.RemovalDeleting,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: deleting its ConfigMap, claim and StatefulSet",
		},
		{
			name:     "its objects gone: the mark is set and the server created again",
			in:       upToDate(3, replaceServer("demo-1"), spec("demo-1", gone), metaMembers("demo-0", "demo-2")),
			removal:  clusterv1beta1.RemovalRejoining,
			create:   []string{"demo-1"},
			annotate: map[string]string{clusterv1beta1.AnnotationReplaceRejoining: "demo-1"},
			reason:   clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: creating it again with an empty claim",
		},
		{
			name:    "marked and created: it waits to rejoin the meta group, and is not replaced again",
			in:      upToDate(3, replaceServer("demo-1"), rejoiningMark("demo-1"), func(in *Input) { in.Observation.MetaCurrent = []string{"demo-0", "demo-2"} }),
			removal: clusterv1beta1.RemovalRejoining,
			reason:  clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: waiting for it to rejoin the JetStream meta group",
		},
		{
			name:    "a member again: it waits to catch up",
			in:      upToDate(3, replaceServer("demo-1"), rejoiningMark("demo-1"), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "ORDERS: demo-1 is catching up")),
			removal: clusterv1beta1.RemovalRejoining,
			reason:  clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1: waiting for it to catch up: Settled: ORDERS: demo-1 is catching up",
		},
		{
			name:   "caught up: both annotations are cleared and the cluster is up to date",
			in:     upToDate(3, replaceServer("demo-1"), rejoiningMark("demo-1")),
			clear:  []string{clusterv1beta1.AnnotationReplaceServer, clusterv1beta1.AnnotationReplaceRejoining},
			reason: clusterv1beta1.ReasonUpToDate, status: metav1.ConditionFalse,
			message: "",
		},
		{
			name:   "a name that is not a server of the cluster holds, naming the servers",
			in:     upToDate(3, replaceServer("demo-7")),
			reason: clusterv1beta1.ReasonReplaceBlocked, status: metav1.ConditionFalse,
			message: `the annotation cluster.nats-operator.io/replace-server names "demo-7", which is not a server of this NatsCluster (demo-0 to demo-2): set it to one of them, or remove it; no server was changed`,
		},
		{
			name:   "an R2 stream on both of 2 servers would lose its quorum: held",
			in:     upToDate(2, replaceServer("demo-1"), group("PAIR", "demo-0", "demo-1")),
			reason: clusterv1beta1.ReasonReplaceBlocked, status: metav1.ConditionFalse,
			message: "replacement held before demo-1: $G/PAIR (2 replicas) has a replica on every server, and without demo-1 it keeps no quorum: add a server (spec.replicas 3) so it can move, or remove the annotation cluster.nats-operator.io/replace-server; no server was changed by this hold",
		},
		{
			name:   "without $SYS: held, naming the field",
			in:     upToDate(3, replaceServer("demo-1"), cannotReload("reloads need spec.auth.systemCredentials")),
			reason: clusterv1beta1.ReasonReplaceBlocked, status: metav1.ConditionFalse,
			message: "replacement held before demo-1: removing demo-1 needs $SYS to move its replicas and remove its JetStream peer: reloads need spec.auth.systemCredentials; no server was changed by this hold",
		},
		{
			name:   "a stale mark is cleared",
			in:     upToDate(3, rejoiningMark("demo-1")),
			clear:  []string{clusterv1beta1.AnnotationReplaceRejoining},
			reason: clusterv1beta1.ReasonUpToDate, status: metav1.ConditionFalse,
		},
		{
			name:  "a claim template the claim cannot take replaces the highest server first",
			in:    upToDate(3, spec("demo-0", func(s *ServerState) { s.ClaimTemplateDiffers = true }), spec("demo-2", func(s *ServerState) { s.ClaimTemplateDiffers = true })),
			phase: clusterv1beta1.RemovalStopping, removal: clusterv1beta1.RemovalStopping,
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-2 (its claim template changed): stopping it",
		},
		{
			name:    "the next claim replacement waits until the last one rejoined",
			in:      upToDate(3, spec("demo-1", func(s *ServerState) { s.ClaimTemplateDiffers = true }), spec("demo-2", gone), metaMembers("demo-0", "demo-1")),
			removal: clusterv1beta1.RemovalStopping, create: []string{"demo-2"},
			reason: clusterv1beta1.ReasonReplacingServer, status: metav1.ConditionTrue,
			message: "replacing demo-1 (its claim template changed): stopping it; waiting for MetaMembership: demo-2 is not in the JetStream meta group",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			switch {
			case tt.phase == "" && d.Step != nil:
				t.Errorf("Step = %s, want none", toJSON(d.Step))
			case tt.phase != "" && (d.Step == nil || d.Step.Kind != RemoveServer || d.Step.Remove == nil || !d.Step.Remove.Replace ||
				d.Step.Remove.Phase != tt.phase):
				t.Errorf("Step = %s, want RemoveServer (replace) %s", toJSON(d.Step), tt.phase)
			}
			if !slices.Equal(d.Create, tt.create) {
				t.Errorf("Create = %v, want %v", d.Create, tt.create)
			}
			if len(d.Annotate) != len(tt.annotate) || (len(tt.annotate) > 0 && toJSON(d.Annotate) != toJSON(tt.annotate)) {
				t.Errorf("Annotate = %v, want %v", d.Annotate, tt.annotate)
			}
			if !slices.Equal(d.ClearAnnotations, tt.clear) {
				t.Errorf("ClearAnnotations = %v, want %v", d.ClearAnnotations, tt.clear)
			}
			if d.Progressing.Status != tt.status || d.Progressing.Reason != tt.reason || (tt.message != "" && d.Progressing.Message != tt.message) {
				t.Errorf("Progressing = %s %s %q\nwant %s %s %q", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message, tt.status, tt.reason, tt.message)
			}
			var want []clusterv1beta1.ServerRemoval
			if tt.removal != "" {
				want = []clusterv1beta1.ServerRemoval{{Server: d.Removals[0].Server, Phase: tt.removal, Replace: true}}
			}
			if !slices.Equal(d.Removals, want) {
				t.Errorf("Removals = %+v, want %+v", d.Removals, want)
			}
		})
	}
}

func TestPlanExpandClaims(t *testing.T) {
	grow := func(requested bool, progress string) func(*ServerState) {
		return func(s *ServerState) {
			s.ClaimExpansion = &ClaimExpansion{Size: "2Gi", Requested: requested, Progress: progress}
		}
	}
	tests := []struct {
		name    string
		in      Input
		step    string // server of the ExpandClaim step; "" for none
		reason  string
		message string
	}{
		{
			name: "the highest server's claim is raised first",
			in:   upToDate(3, spec("demo-0", grow(false, "")), spec("demo-2", grow(false, ""))),
			step: "demo-2", reason: clusterv1beta1.ReasonExpandingStorage,
			message: "growing the claim of demo-2 to 2Gi in place, one server at a time, no restart: raising its claim's storage request",
		},
		{
			name:    "one at a time: a claim growing is waited for",
			in:      upToDate(3, spec("demo-0", grow(true, "1Gi of 2Gi: FileSystemResizePending")), spec("demo-2", grow(false, ""))),
			reason:  clusterv1beta1.ReasonExpandingStorage,
			message: "growing the claim of demo-0 to 2Gi in place, one server at a time, no restart: waiting for the volume to grow: 1Gi of 2Gi: FileSystemResizePending",
		},
		{
			name:   "nothing to grow: up to date",
			in:     upToDate(3),
			reason: clusterv1beta1.ReasonUpToDate,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			got := ""
			if d.Step != nil {
				if d.Step.Kind != ExpandClaim || d.Step.Expand == nil {
					t.Fatalf("Step = %s, want ExpandClaim", toJSON(d.Step))
				}
				got = d.Step.Expand.Server
			}
			if got != tt.step {
				t.Errorf("ExpandClaim of %q, want %q", got, tt.step)
			}
			if d.Progressing.Reason != tt.reason || (tt.message != "" && d.Progressing.Message != tt.message) {
				t.Errorf("Progressing = %s %q, want %s %q", d.Progressing.Reason, d.Progressing.Message, tt.reason, tt.message)
			}
			if len(d.Create) > 0 || len(d.Removals) > 0 {
				t.Errorf("Create %v, Removals %v: an expansion creates and removes nothing", d.Create, d.Removals)
			}
		})
	}
}
