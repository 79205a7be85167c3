package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// readyCondition is Ready from the pods: all, a quorum, or fewer.
func readyCondition(ready, total int32) (metav1.ConditionStatus, string, string) {
	msg := fmt.Sprintf("%d of %d servers ready", ready, total)
	switch {
	case total > 0 && ready == total:
		return metav1.ConditionTrue, clusterv1beta1.ReasonAllServersReady, msg
	case ready*2 > total:
		return metav1.ConditionTrue, clusterv1beta1.ReasonQuorumAvailable, msg
	default:
		return metav1.ConditionFalse, clusterv1beta1.ReasonQuorumUnavailable, msg
	}
}

// observedStatus fills the parts of status that come from the pods and the
// snapshot: readiness, servers[], version, Ready, Settled and JetStream.
func (c *Controller) observedStatus(status *clusterv1beta1.NatsClusterStatus, f *facts, snap *observe.Snapshot) {
	nc := f.nc
	var ready int32
	status.Servers = status.Servers[:0:0]
	version := ""
	sameVersion := true
	for _, so := range f.servers {
		s := clusterv1beta1.ServerStatus{Name: so.name, Ready: kubeutil.PodReady(so.pod), StartProblem: startProblem(so.pod)}
		if s.Ready {
			ready++
		}
		if srv, ok := snap.Server(so.name); ok && srv.Answered {
			s.Version = srv.Version
			s.ConfigRevision = srv.ConfigRevision
			if nc.Spec.Gateway != nil {
				s.Gateways = srv.Gateways
			}
			if nc.Spec.LeafNodes != nil && len(nc.Spec.LeafNodes.Remotes) > 0 {
				s.Leafnodes = srv.LeafRemotes
			}
		}
		if s.Version == "" || (version != "" && s.Version != version) {
			sameVersion = false
		}
		version = s.Version
		status.Servers = append(status.Servers, s)
	}
	if sameVersion && version != "" {
		status.Version = version
	}
	status.ReadyReplicas = ready
	rs, rr, rm := readyCondition(ready, nc.Spec.Replicas)
	c.setCondition(status, nc, clusterv1beta1.ConditionReady, rs, rr, rm)
	v := snap.Verdict
	c.setCondition(status, nc, clusterv1beta1.ConditionSettled, v.Status, v.Reason, v.Message)
	c.gatewaysConnected(status, nc, f, snap)
	c.leafnodesConnected(status, nc, f, snap)
	c.listenersAuthenticated(status, nc)

	if nc.Spec.JetStream != nil {
		status.JetStream = &clusterv1beta1.JetStreamStatus{
			MetaLeader: snap.MetaLeader,
			Limits:     readableLimits(&nc.Spec),
			Store:      clusterv1beta1.StorePersistentVolumeClaim,
		}
		if nc.Spec.JetStream.VolumeClaimTemplate == nil {
			status.JetStream.Store = clusterv1beta1.StoreEphemeral
		}
		status.JetStream.FaultTolerance = faultTolerance(snap, f.serverNames())
	} else {
		status.JetStream = nil
	}
}

// recordStartProblems emits a ServerCannotStart Event when a server's start
// problem appears or changes from what status last said; a sync that finds
// the same problem again emits none.
func (c *Controller) recordStartProblems(nc *clusterv1beta1.NatsCluster, servers []clusterv1beta1.ServerStatus) {
	before := map[string]string{}
	for _, s := range nc.Status.Servers {
		before[s.Name] = s.StartProblem
	}
	for _, s := range servers {
		if s.StartProblem == "" || s.StartProblem == before[s.Name] {
			continue
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, clusterv1beta1.EventServerCannotStart,
			"%s cannot start: %s; revert spec.version or fix the image (spec.image)", s.Name, s.StartProblem)
	}
}

// faultTolerance is status.jetstream.faultTolerance: how many servers the
// cluster can lose now (rollout.FaultTolerance); nil while not observed.
func faultTolerance(snap *observe.Snapshot, servers []string) *clusterv1beta1.FaultTolerance {
	n, least, ok := rollout.FaultTolerance(observation(snap), servers)
	if !ok {
		return nil
	}
	ft := &clusterv1beta1.FaultTolerance{Servers: int32(n)}
	for _, g := range least {
		ft.Groups = append(ft.Groups, clusterv1beta1.GroupFaultTolerance{Group: g.Group, Replicas: int32(len(g.Members)),
			Current: int32(len(g.Current)), FaultTolerance: int32(g.Tolerates())})
	}
	return ft
}

// gatewaysConnected sets GatewaysConnected with spec.gateway (and removes
// it without): True when every server answered and has an outbound
// gateway to every remote of the spec and to every cluster any server
// reaches (learned from the supercluster); False GatewaysDisconnected
// naming each server and the clusters it lacks.
func (c *Controller) gatewaysConnected(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, f *facts, snap *observe.Snapshot) {
	g := nc.Spec.Gateway
	if g == nil {
		meta.RemoveStatusCondition(&status.Conditions, clusterv1beta1.ConditionGatewaysConnected)
		return
	}
	want := map[string]bool{}
	for _, r := range g.Remotes {
		want[r.Name] = true
	}
	for _, so := range f.servers {
		if srv, ok := snap.Server(so.name); ok {
			for _, gw := range srv.Gateways {
				want[gw] = true
			}
		}
	}
	clusters := slices.Sorted(maps.Keys(want))
	var missing []string
	for _, so := range f.servers {
		srv, ok := snap.Server(so.name)
		switch {
		case !ok || !srv.Answered:
			missing = append(missing, so.name+" does not answer")
		default:
			var lacks []string
			for _, cl := range clusters {
				if !slices.Contains(srv.Gateways, cl) {
					lacks = append(lacks, cl)
				}
			}
			if len(lacks) > 0 {
				missing = append(missing, so.name+" has no gateway to "+strings.Join(lacks, ", "))
			}
		}
	}
	switch {
	case len(missing) > 0:
		c.setCondition(status, nc, clusterv1beta1.ConditionGatewaysConnected, metav1.ConditionFalse, clusterv1beta1.ReasonGatewaysDisconnected,
			strings.Join(missing, "; "))
	case len(clusters) == 0:
		c.setCondition(status, nc, clusterv1beta1.ConditionGatewaysConnected, metav1.ConditionFalse, clusterv1beta1.ReasonGatewaysDisconnected,
			"no server has a gateway to another cluster yet, and spec.gateway.remotes names none: waiting for another cluster to connect")
	default:
		c.setCondition(status, nc, clusterv1beta1.ConditionGatewaysConnected, metav1.ConditionTrue, clusterv1beta1.ReasonAllGatewaysConnected,
			fmt.Sprintf("every server has a gateway to %s", strings.Join(clusters, ", ")))
	}
}

// leafnodesConnected sets LeafnodesConnected with spec.leafnodes.remotes
// (and removes it without): True when every server answered and has a leaf
// connection per remote; False LeafnodesDisconnected naming each server
// and how many it has.
func (c *Controller) leafnodesConnected(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, f *facts, snap *observe.Snapshot) {
	l := nc.Spec.LeafNodes
	if l == nil || len(l.Remotes) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, clusterv1beta1.ConditionLeafnodesConnected)
		return
	}
	want := len(l.Remotes)
	var missing []string
	for _, so := range f.servers {
		srv, ok := snap.Server(so.name)
		switch {
		case !ok || !srv.Answered:
			missing = append(missing, so.name+" does not answer")
		case len(srv.LeafRemotes) < want:
			missing = append(missing, fmt.Sprintf("%s has %d of %d leaf connections", so.name, len(srv.LeafRemotes), want))
		}
	}
	if len(missing) > 0 {
		c.setCondition(status, nc, clusterv1beta1.ConditionLeafnodesConnected, metav1.ConditionFalse, clusterv1beta1.ReasonLeafnodesDisconnected,
			strings.Join(missing, "; "))
		return
	}
	names := make([]string, len(l.Remotes))
	for i, r := range l.Remotes {
		names[i] = r.Name
	}
	c.setCondition(status, nc, clusterv1beta1.ConditionLeafnodesConnected, metav1.ConditionTrue, clusterv1beta1.ReasonAllLeafnodesConnected,
		fmt.Sprintf("every server has a leaf connection to each remote (%s)", strings.Join(names, ", ")))
}

// listenersAuthenticated sets ListenersAuthenticated with a gateway or a
// leaf listener (and removes it without): False InsecureListeners names the
// listeners the spec runs open, True says how each authenticates.
func (c *Controller) listenersAuthenticated(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster) {
	g, l := nc.Spec.Gateway, nc.Spec.LeafNodes
	accepts := l != nil && l.Accept
	if g == nil && !accepts {
		meta.RemoveStatusCondition(&status.Conditions, clusterv1beta1.ConditionListenersAuthenticated)
		return
	}
	var open, secured []string
	if g != nil {
		if g.TLSOn() {
			secured = append(secured, "the gateway by TLS verified on both sides")
		} else {
			open = append(open, "the gateway (spec.gateway.insecure): any pod that reaches port 7222 can join the supercluster and receive every account's messages")
		}
	}
	if accepts {
		if nc.Spec.Auth != nil {
			secured = append(secured, "the leaf listener by the accounts of spec.auth")
		} else {
			open = append(open, "the leaf listener (spec.leafnodes.insecure): any pod that reaches port 7422 connects as a leaf into the global account")
		}
	}
	if len(open) > 0 {
		c.setCondition(status, nc, clusterv1beta1.ConditionListenersAuthenticated, metav1.ConditionFalse, clusterv1beta1.ReasonInsecureListeners,
			"runs without authentication, as its spec says: "+strings.Join(open, "; "))
		return
	}
	c.setCondition(status, nc, clusterv1beta1.ConditionListenersAuthenticated, metav1.ConditionTrue, clusterv1beta1.ReasonListenersAuthenticated,
		"authenticated: "+strings.Join(secured, "; "))
}

// readableLimits are the JetStream limits every server's config gets, for
// status: a derived limit that is not a whole MiB is rounded down to one, so
// kubectl describe says 972Mi rather than 1020054732 (95% of a 1Gi claim).
// Rounding down keeps the figure at or under what the servers enforce
// (by less than 1 MiB); a limit set in spec is shown as the user wrote it.
func readableLimits(spec *clusterv1beta1.NatsClusterSpec) *clusterv1beta1.JetStreamLimits {
	l := render.DeriveJetStreamLimits(spec)
	if l == nil {
		return nil
	}
	var set clusterv1beta1.JetStreamLimits
	if spec.JetStream.Limits != nil {
		set = *spec.JetStream.Limits
	}
	if set.MaxMemoryStore == nil {
		l.MaxMemoryStore = wholeMiB(l.MaxMemoryStore)
	}
	if set.MaxFileStore == nil {
		l.MaxFileStore = wholeMiB(l.MaxFileStore)
	}
	return l
}

// wholeMiB rounds a quantity of at least 1 MiB down to whole MiB; smaller or
// nil quantities are returned as they are.
func wholeMiB(q *resource.Quantity) *resource.Quantity {
	const mi = 1 << 20
	if q == nil || q.Value() < mi || q.Value()%mi == 0 {
		return q
	}
	return resource.NewQuantity(q.Value()/mi*mi, resource.BinarySI)
}
