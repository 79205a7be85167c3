package rollout

import (
	"fmt"
	"slices"
	"strings"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// ConfigFacts are the facts of a server config that decide whether a server on
// one config and a server on another can run side by side. Two configs with
// equal facts roll one server at a time whatever else differs. pkg/render
// computes them (render.Facts, an identical struct the controller converts):
// a field of nats.conf is either one of these or proven to roll, and a test in
// pkg/render fails for a field that is neither.
type ConfigFacts struct {
	// Version is the nats-server version, e.g. 2.15.2.
	Version string
	// ClusterName is cluster.name.
	ClusterName string
	// Operator is the NATS operator's public key (O...); empty without auth.
	Operator string
	// SystemAccount is the system account's public key (A...); empty without
	// auth (the server then uses $SYS).
	SystemAccount string
	// Accounts are the preloaded accounts other than the system account
	// (accountTrustRefs), each "<public key>@<digest of its JWT>", in any
	// order.
	Accounts []string
	// Resolver is the account resolver type (full, cache or MemoryResolver); empty without
	// auth.
	Resolver string
	// JetStream says whether JetStream is enabled.
	JetStream bool
	// JetStreamDomain is jetstream.domain.
	JetStreamDomain string
	// MaxMemoryStore and MaxFileStore are the JetStream limits in bytes.
	MaxMemoryStore int64
	MaxFileStore   int64
	// ServerTags are the server tags as key:value, in any order.
	ServerTags []string
	// SystemUser says whether the config has the controller's user of the
	// built-in system account ($SYS), which clusters without auth get so the
	// controller can send $SYS requests; always false with auth.
	SystemUser bool
	// SystemUserNKey says whether that user is an nkey user (nothing
	// secret on the wire) rather than a password user.
	SystemUserNKey bool
	// RouteTLS says whether the routes are TLS (cluster.tls).
	RouteTLS bool
	// ClientTLS says whether clients connect over TLS (tls); ClientVerify
	// whether they must present a certificate (tls.verify).
	ClientTLS    bool
	ClientVerify bool
	// RoutesCertificate and ClientCertificate are digests of the TLS
	// Secrets (server_metadata): another one is a new certificate.
	RoutesCertificate string
	ClientCertificate string
	// RoutesCA are the digests of the route CA certificates a server was
	// given (comma-separated, sorted); empty when not known (a server an
	// older release wrote). Only a CA set sharing none of them is another
	// route CA.
	RoutesCA string
	// LameDuckDuration and LameDuckGracePeriod are lame_duck_duration and
	// lame_duck_grace_period (30s, 10s).
	LameDuckDuration    string
	LameDuckGracePeriod string
	// Gateway says whether the config has a gateway block (spec.gateway).
	Gateway bool
	// GatewayRemotes is the rest of the gateway block in one canonical
	// string (remotes, advertise, reject_unknown_cluster); empty without a
	// gateway.
	GatewayRemotes string
	// GatewayTLS says whether the gateway block has TLS
	// (spec.gateway.tls); GatewayCA is the digest of the CA bundle the
	// servers verify other clusters' gateways against (server_metadata);
	// both empty without a gateway.
	GatewayTLS bool
	GatewayCA  string
	// LeafnodesAccept says whether the servers accept leaf connections;
	// LeafnodeRemotes are the remotes they connect to as a leaf, in one
	// canonical string; empty without.
	LeafnodesAccept bool
	// LeafnodesTLS says whether the leaf listener requires TLS
	// (spec.leafnodes.tls).
	LeafnodesTLS    bool
	LeafnodeRemotes string
	// WebSocket is the websocket block in one canonical string; empty
	// without (spec.websocket).
	WebSocket string
	// MQTT is the mqtt listener (port, TLS) and MQTTDelivery its ack_wait
	// and max_ack_pending; both empty without (spec.mqtt).
	MQTT         string
	MQTTDelivery string
	// MonitorTLS says whether the monitoring port serves HTTPS.
	MonitorTLS bool
}

// ChangeKind is one kind of difference between a running and a target config.
type ChangeKind string

// The change kinds, in the order Changes lists them.
const (
	ChangeAddAuth       ChangeKind = "AddAuth"
	ChangeRemoveAuth    ChangeKind = "RemoveAuth"
	ChangeOperator      ChangeKind = "Operator"
	ChangeSystemAccount ChangeKind = "SystemAccount"
	ChangeClusterName   ChangeKind = "ClusterName"
	// ChangeStandalone is one JetStream server running standalone (no
	// cluster block, no cluster name) becoming a cluster, or a cluster
	// becoming one standalone server (spec.replicas 1 <-> more, with
	// JetStream). Measured on 2.15.2 (matrix/standalone_matrix_test.go):
	// the standalone server's streams are not in the meta group the
	// cluster forms, so nats-server hides them at once and deletes them
	// from disk as orphans 30 s after the meta group recovered; back to
	// standalone, a stream of more than one replica is not loaded
	// ("replicas > 1 not supported in non-clustered mode"). So it is
	// held, and restart-all completes it with reset-jetstream when streams
	// exist.
	ChangeStandalone      ChangeKind = "Standalone"
	ChangeJetStreamDomain ChangeKind = "JetStreamDomain"
	// ChangeJetStreamDomainAddRemove is a domain added or removed: nats-server
	// treats an empty domain as the same as any (sameDomain in events.go).
	ChangeJetStreamDomainAddRemove ChangeKind = "JetStreamDomainAddRemove"
	ChangeJetStream                ChangeKind = "JetStream"
	ChangeVersion                  ChangeKind = "Version"
	// ChangeJetStreamLimitsRaised is JetStream limits raised: both
	// max_memory_store and max_file_store are set (not 0) before and after,
	// neither goes down and at least one goes up (raisedLimits).
	ChangeJetStreamLimitsRaised ChangeKind = "JetStreamLimitsRaised"
	// ChangeJetStreamLimitsLowered is every other change of the JetStream
	// limits: one goes down (even while the other goes up), or one is set
	// where it was not or is no longer set. A limit of 0 is not set, and
	// nats-server then sizes it from the machine's memory or disk, so
	// whether 0 -> N or N -> 0 raises or lowers the limit depends on the
	// machine: it is taken as lowered, which never reloads, as the reload
	// matrix has no case that proves it reloads.
	ChangeJetStreamLimitsLowered ChangeKind = "JetStreamLimitsLowered"
	ChangeServerTags             ChangeKind = "ServerTags"
	ChangeAccounts               ChangeKind = "Accounts"
	ChangeResolver               ChangeKind = "Resolver"
	// ChangeSystemUser is the controller's system user added or removed on a
	// cluster without auth. With auth on either side it is not listed: the
	// auth change says it all.
	ChangeSystemUser ChangeKind = "SystemUser"
	// ChangeSystemUserNKey is the controller's system user moved from a
	// password to an nkey, or back.
	ChangeSystemUserNKey ChangeKind = "SystemUserNKey"
	// ChangeRouteTLS is route TLS turned on or off.
	ChangeRouteTLS ChangeKind = "RouteTLS"
	// ChangeClientTLS is client TLS turned on or off, or client
	// certificates required or no longer (tls.verify).
	ChangeClientTLS ChangeKind = "ClientTLS"
	// ChangeRouteCertificate and ChangeClientCertificate are a new
	// certificate in the TLS Secret (its digest), TLS staying on.
	ChangeRouteCertificate  ChangeKind = "RouteCertificate"
	ChangeClientCertificate ChangeKind = "ClientCertificate"
	// ChangeRouteCA is another route CA (both known), route TLS staying on:
	// each server checks every new route against the CA it loaded, so a
	// server on the new CA and one on the old cannot route to each other
	// (TestTLSRouteNewCAOneServerAtATime, and the route-compatibility
	// matrix case "another route CA").
	ChangeRouteCA ChangeKind = "RouteCA"
	// ChangeLameDuck is another lame_duck_duration or
	// lame_duck_grace_period (spec.lameDuck). Both are local to a server
	// (how it leaves), so servers with either route and keep one meta
	// group; nats-server reloads neither ("config reload not supported for
	// LameDuckGracePeriod"), so it restarts.
	ChangeLameDuck ChangeKind = "LameDuck"
	// ChangeGateway is the gateway added or removed (spec.gateway). Rolled
	// one server at a time it splits the supercluster mid-way: the
	// gateway matrix (matrix/gateway_matrix_test.go) finds the meta group
	// spanning both clusters broken at a mixed stage. With JetStream on
	// either side the planner holds it with OwnMetaGroup, which no
	// annotation completes; without, with GatewayChangeBlocked.
	ChangeGateway ChangeKind = "Gateway"
	// ChangeGatewayRemotes is another gateway remote (added, removed, other
	// URLs), advertise address or reject_unknown_cluster, the gateway
	// staying. nats-server reloads none ("config reload not supported for
	// Gateway"), and the gateway matrix finds each rolls one server at a
	// time: the servers learn of every cluster from the ones they reach.
	ChangeGatewayRemotes ChangeKind = "GatewayRemotes"
	// ChangeGatewayTLS is gateway TLS turned on or off (spec.gateway.tls),
	// the gateway staying: a server with gateway TLS and one without cannot
	// connect (the gateway matrix case "turn gateway TLS on"), so it is
	// held with GatewayChangeBlocked; nats-server does not reload it.
	ChangeGatewayTLS ChangeKind = "GatewayTLS"
	// ChangeGatewayCA is another bundle of CAs the servers verify other
	// clusters' gateways against (a remote's routes CA, spec.gateway.tls.caSecret):
	// nats-server reloads a gateway's TLS configuration (its reload.go
	// compares the gateway block without it), and the gateway matrix case
	// "another gateway CA bundle" rolls one server at a time.
	ChangeGatewayCA ChangeKind = "GatewayCA"
	// ChangeLeafnodesAccept is accepting leaf connections or no longer
	// (spec.leafnodes.accept): nats-server does not reload it ("config
	// reload not supported for LeafNode"), and servers listening and not
	// route and keep one meta group, so it restarts one at a time.
	ChangeLeafnodesAccept ChangeKind = "LeafnodesAccept"
	// ChangeLeafnodesTLS is the leaf listener's TLS turned on or off
	// (spec.leafnodes.tls): servers with it and without route and keep
	// one meta group (the route-compatibility matrix), and nats-server does
	// not reload it, so it restarts one server at a time. Leaves connected
	// without TLS are refused by the servers with it.
	ChangeLeafnodesTLS ChangeKind = "LeafnodesTLS"
	// ChangeLeafnodeRemotes is another set of leaf remotes (added,
	// removed, other URLs, credentials, account, TLS or CA): nats-server reloads
	// them without auth, connecting to the added remotes and closing the
	// removed ones (reload.go's leafNodeOption).
	ChangeLeafnodeRemotes ChangeKind = "LeafnodeRemotes"
	// ChangeWebSocket is the WebSocket listener added, removed or changed
	// (spec.websocket): it is local to a server, so servers with and
	// without it route and keep one meta group (the route-compatibility
	// matrix), and nats-server reloads none of it but its certificate, so
	// it restarts one server at a time.
	ChangeWebSocket ChangeKind = "WebSocket"
	// ChangeMQTT is the MQTT listener added, removed, or another port or
	// TLS (spec.mqtt): local to a server like WebSocket's, not reloaded.
	ChangeMQTT ChangeKind = "MQTT"
	// ChangeMQTTDelivery is another MQTT ack wait or max ack pending, the
	// listener staying: nats-server reloads both (reload.go's
	// mqttAckWaitReload and mqttMaxAckPendingReload), as the reload matrix
	// shows.
	ChangeMQTTDelivery ChangeKind = "MQTTDelivery"
	// ChangeMonitorTLS is the monitoring port moved from HTTP to HTTPS or
	// back (spec.monitoring.tls): local to a server, not reloaded.
	ChangeMonitorTLS ChangeKind = "MonitorTLS"
)

// Effect is what a kind of change does to a cluster rolled one server at a
// time.
type Effect struct {
	// Splits: a server on the old config and one on the new config cannot
	// work together (no routes, or no JetStream meta group with one leader and
	// every member current), so the change cannot roll one server at a time.
	Splits bool
	// ResetsJetStream: once every server runs the new config, JetStream
	// starts empty; streams from before stay on the volumes, unreachable.
	// Another cluster name does this too: render names the servers after the
	// cluster, so the meta group's peers of before are unknown names.
	ResetsJetStream bool
	// Reloads: the change can be applied to a running server by a config
	// reload (SIGHUP / $SYS.REQ.SERVER.<id>.RELOAD): nats-server accepts it,
	// then reports the new config revision and a new config_load_time in
	// /varz, and the cluster stays settled; established by the reload matrix
	// in matrix/reload_matrix_test.go. The matrix also requires that the server
	// then runs the change (tags, JetStream limits, accounts, resolver) and
	// still fetches accounts from its peers, with and without auth. A version
	// change never reloads: it is a new binary.
	Reloads bool
	// ReloadsWithoutAuth: the same as Reloads, on a cluster without
	// spec.auth (with the controller's system user block or without): the
	// reload matrix's cases with no auth on either side all reload. It is
	// true wherever Reloads is, and also for a kind that reloads only
	// without auth (with auth every reload breaks the account resolver);
	// false for a kind no case without auth has (every auth, account and
	// resolver change).
	ReloadsWithoutAuth bool
	// ReloadsWithMemoryResolver: the same as Reloads, on a cluster in
	// operator mode whose target config runs the memory resolver
	// (spec.auth.resolver Memory): the reload matrix's cases with auth on
	// both sides and the memory resolver on the new side all reload. With
	// the memory resolver nats-server's reload installs a resolver that
	// needs no starting, so what reloads without auth reloads there too.
	ReloadsWithMemoryResolver bool
	// What names the change in messages, e.g. "adding auth".
	What string
	// Why says, for a split, what the servers on either side fail to do.
	Why string
	// HoldReason is the Progressing reason of a held transition with this
	// change; empty means UnsupportedChange.
	HoldReason string
}

// MemoryResolver is Facts.Resolver of a server on the memory resolver (render
// writes resolver.type "mem" for spec.auth.resolver Memory).
const MemoryResolver = "mem"

// effects is the classification of every change kind. It is not guessed: the
// route-compatibility matrix in matrix/matrix_test.go starts real nats-server
// processes on the old and the new config side by side and asserts that this
// table equals what they did; the reload matrix in matrix/reload_matrix_test.go
// does the same for Reloads.
//
// With nats-server 2.15 only the controller's system user reloads (it exists
// only without auth). nats-server refuses to reload the system account
// (every auth change), the server name (another cluster name), the
// JetStream domain, lowered JetStream limits ("config reload not
// supported for decreasing jetstream max memory and store") and the lame
// duck settings ("config reload not supported for LameDuckGracePeriod:
// old=10s, new=1s"). It reloads
// JetStream on or off, but the cluster does not settle (no meta group
// forms). It reloads tags, raised limits, accounts and the resolver, but
// with a full or cache resolver every reload replaces the account resolver
// with one it never starts: the server no longer fetches accounts from its
// peers, and another resolver type does not take effect (the old resolver
// keeps answering lookups). Without auth tags, raised limits and new
// certificates reload cleanly, with the system user block or without
// (ReloadsWithoutAuth); in operator mode on the memory resolver, which
// needs no starting, so do they and accounts added or removed
// (ReloadsWithMemoryResolver).
var effects = map[ChangeKind]Effect{
	ChangeAddAuth: {Splits: true, ResetsJetStream: true, What: "adding auth", HoldReason: clusterv1beta1.ReasonAuthChangeBlocked,
		Why: "a server with auth and one without cannot route to each other"},
	ChangeRemoveAuth: {Splits: true, ResetsJetStream: true, What: "removing auth", HoldReason: clusterv1beta1.ReasonAuthChangeBlocked,
		Why: "a server with auth and one without cannot route to each other"},
	ChangeOperator: {Splits: true, ResetsJetStream: true, What: "another NATS operator",
		Why: "servers with different system accounts route but cannot form one JetStream meta group"},
	ChangeSystemAccount: {Splits: true, ResetsJetStream: true, What: "another system account",
		Why: "servers with different system accounts route but cannot form one JetStream meta group"},
	ChangeStandalone: {Splits: true, ResetsJetStream: true, What: "one standalone JetStream server becoming a cluster, or a cluster becoming one", HoldReason: clusterv1beta1.ReasonStandaloneChangeBlocked,
		Why: "a standalone server's streams are not in the cluster's meta group: nats-server deletes them as orphans 30 s after the cluster forms, and a standalone server loads no stream of more than one replica"},
	ChangeClusterName: {Splits: true, ResetsJetStream: true, What: "another cluster name",
		Why: "servers with different cluster names refuse each other's routes"},
	ChangeJetStream: {Splits: true, What: "turning JetStream on or off",
		Why: "servers with and without JetStream cannot keep one JetStream meta group (and every stream replica) current"},
	ChangeJetStreamDomain: {Splits: true, What: "another JetStream domain",
		Why: "servers in different JetStream domains route but cannot form one JetStream meta group"},
	ChangeJetStreamDomainAddRemove: {What: "adding or removing the JetStream domain"},
	ChangeVersion:                  {What: "another nats-server version"},
	ChangeJetStreamLimitsRaised:    {ReloadsWithoutAuth: true, ReloadsWithMemoryResolver: true, What: "raised JetStream limits"},
	ChangeJetStreamLimitsLowered:   {What: "lowered JetStream limits, or a limit set or unset"},
	ChangeServerTags:               {ReloadsWithoutAuth: true, ReloadsWithMemoryResolver: true, What: "other server tags"},
	ChangeAccounts:                 {ReloadsWithMemoryResolver: true, What: "other preloaded accounts"},
	ChangeResolver:                 {What: "another account resolver"},
	ChangeSystemUser:               {Reloads: true, ReloadsWithoutAuth: true, What: "adding or removing the controller's system user"},
	ChangeSystemUserNKey:           {Reloads: true, ReloadsWithoutAuth: true, What: "the controller's system user from a password to an nkey, or back"},
	ChangeRouteTLS: {Splits: true, What: "turning route TLS on or off",
		Why: "a server with route TLS and one without cannot route to each other"},
	ChangeClientTLS:        {What: "turning client TLS on or off, or requiring client certificates or no longer"},
	ChangeRouteCertificate: {ReloadsWithoutAuth: true, ReloadsWithMemoryResolver: true, What: "a new route certificate"},
	ChangeRouteCA: {Splits: true, What: "another route CA",
		Why: "each server checks every new route against the CA it loaded: servers given different CAs cannot route to each other"},
	ChangeClientCertificate: {ReloadsWithoutAuth: true, ReloadsWithMemoryResolver: true, What: "a new client certificate"},
	ChangeLameDuck:          {What: "other lame duck settings"},
	ChangeGateway: {Splits: true, What: "adding or removing the gateway", HoldReason: clusterv1beta1.ReasonGatewayChangeBlocked,
		Why: "servers with the gateway and servers without it cannot keep one JetStream meta group across the supercluster, and their clients' messages reach the other clusters only from some servers"},
	ChangeGatewayRemotes: {What: "other gateway remotes, advertise address or rejectUnknownCluster"},
	ChangeGatewayTLS: {Splits: true, What: "turning gateway TLS on or off", HoldReason: clusterv1beta1.ReasonGatewayChangeBlocked,
		Why: "a server with gateway TLS and one without cannot connect to each other: the clusters would reach each other only from some servers (gateway TLS is on unless spec.gateway.insecure is true: a cluster an earlier release made without spec.gateway.tls keeps running as it does with insecure: true)"},
	ChangeGatewayCA:       {ReloadsWithoutAuth: true, What: "another gateway CA bundle"},
	ChangeLeafnodesAccept: {What: "accepting leaf connections or no longer"},
	ChangeLeafnodesTLS:    {What: "the leaf listener's TLS turned on or off"},
	ChangeLeafnodeRemotes: {ReloadsWithoutAuth: true, What: "other leaf remotes"},
	ChangeWebSocket:       {What: "the WebSocket listener added, removed or changed"},
	ChangeMQTT:            {What: "the MQTT listener added or removed, or another MQTT port or TLS"},
	ChangeMQTTDelivery:    {ReloadsWithoutAuth: true, ReloadsWithMemoryResolver: true, What: "another MQTT ack wait or max ack pending"},
	ChangeMonitorTLS:      {What: "the monitoring port moved between HTTP and HTTPS"},
}

// changeOrder is the order Changes lists kinds in: auth first, so the hold
// reason and message name the most consequential change.
var changeOrder = []ChangeKind{
	ChangeAddAuth, ChangeRemoveAuth, ChangeOperator, ChangeSystemAccount,
	ChangeStandalone, ChangeClusterName, ChangeJetStreamDomain, ChangeJetStream, ChangeJetStreamDomainAddRemove, ChangeVersion,
	ChangeJetStreamLimitsRaised, ChangeJetStreamLimitsLowered, ChangeServerTags, ChangeAccounts, ChangeResolver, ChangeSystemUser, ChangeSystemUserNKey,
	ChangeRouteTLS, ChangeRouteCA, ChangeClientTLS, ChangeRouteCertificate, ChangeClientCertificate, ChangeLameDuck,
	ChangeGateway, ChangeGatewayRemotes, ChangeGatewayTLS, ChangeGatewayCA, ChangeLeafnodesAccept, ChangeLeafnodesTLS, ChangeLeafnodeRemotes,
	ChangeWebSocket, ChangeMQTT, ChangeMQTTDelivery, ChangeMonitorTLS,
}

// ChangeKinds returns every change kind in the order Changes lists them.
func ChangeKinds() []ChangeKind { return slices.Clone(changeOrder) }

// EffectOf returns the effect of a kind of change.
func EffectOf(k ChangeKind) Effect { return effects[k] }

// Change is one difference between a running and the target config.
type Change struct {
	Kind ChangeKind
	From string
	To   string
}

// String renders a change for messages, e.g. "another cluster name (demo -> other)".
func (c Change) String() string {
	what := effects[c.Kind].What
	if c.From == "" && c.To == "" {
		return what
	}
	return fmt.Sprintf("%s (%s -> %s)", what, orNone(c.From), orNone(c.To))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Classify lists what differs between a running config and the target, in the
// order of ChangeKinds.
func Classify(running, target ConfigFacts) []Change {
	var out []Change
	add := func(k ChangeKind, from, to string) { out = append(out, Change{Kind: k, From: from, To: to}) }
	switch {
	case running.Operator == "" && target.Operator != "":
		add(ChangeAddAuth, "", "")
	case running.Operator != "" && target.Operator == "":
		add(ChangeRemoveAuth, "", "")
	case running.Operator != target.Operator:
		add(ChangeOperator, short(running.Operator), short(target.Operator))
	case running.SystemAccount != target.SystemAccount:
		add(ChangeSystemAccount, short(running.SystemAccount), short(target.SystemAccount))
	}
	switch {
	case running.ClusterName == target.ClusterName:
	case running.JetStream && target.JetStream && (running.ClusterName == "" || target.ClusterName == ""):
		add(ChangeStandalone, standaloneOr(running.ClusterName), standaloneOr(target.ClusterName))
	default:
		add(ChangeClusterName, running.ClusterName, target.ClusterName)
	}
	if running.JetStream && target.JetStream && running.JetStreamDomain != target.JetStreamDomain {
		if running.JetStreamDomain != "" && target.JetStreamDomain != "" {
			add(ChangeJetStreamDomain, running.JetStreamDomain, target.JetStreamDomain)
		} else {
			add(ChangeJetStreamDomainAddRemove, running.JetStreamDomain, target.JetStreamDomain)
		}
	}
	if running.JetStream != target.JetStream {
		add(ChangeJetStream, onOff(running.JetStream), onOff(target.JetStream))
	}
	if running.Version != target.Version {
		add(ChangeVersion, running.Version, target.Version)
	}
	if running.JetStream && target.JetStream &&
		(running.MaxMemoryStore != target.MaxMemoryStore || running.MaxFileStore != target.MaxFileStore) {
		if raisedLimits(running, target) {
			add(ChangeJetStreamLimitsRaised, "", "")
		} else {
			add(ChangeJetStreamLimitsLowered, "", "")
		}
	}
	if !sameSet(running.ServerTags, target.ServerTags) {
		add(ChangeServerTags, strings.Join(sortedCopy(running.ServerTags), ","), strings.Join(sortedCopy(target.ServerTags), ","))
	}
	if running.Operator != "" && target.Operator != "" && !sameAccounts(running, target) {
		add(ChangeAccounts, "", "")
	}
	if running.Operator != "" && target.Operator != "" && running.Resolver != target.Resolver {
		add(ChangeResolver, running.Resolver, target.Resolver)
	}
	if running.Operator == "" && target.Operator == "" && running.SystemUser != target.SystemUser {
		add(ChangeSystemUser, onOff(running.SystemUser), onOff(target.SystemUser))
	}
	if running.SystemUser && target.SystemUser && running.SystemUserNKey != target.SystemUserNKey {
		add(ChangeSystemUserNKey, passwordOrNKey(running.SystemUserNKey), passwordOrNKey(target.SystemUserNKey))
	}
	if running.RouteTLS != target.RouteTLS {
		add(ChangeRouteTLS, onOff(running.RouteTLS), onOff(target.RouteTLS))
	}
	if running.ClientTLS != target.ClientTLS || running.ClientVerify != target.ClientVerify {
		add(ChangeClientTLS, clientTLS(running), clientTLS(target))
	}
	if running.RouteTLS && target.RouteTLS && running.RoutesCertificate != target.RoutesCertificate {
		add(ChangeRouteCertificate, "", "")
	}
	if running.RouteTLS && target.RouteTLS && running.RoutesCA != "" && target.RoutesCA != "" && disjoint(running.RoutesCA, target.RoutesCA) {
		add(ChangeRouteCA, "", "")
	}
	if running.ClientTLS && target.ClientTLS && running.ClientCertificate != target.ClientCertificate {
		add(ChangeClientCertificate, "", "")
	}
	if running.LameDuckDuration != target.LameDuckDuration || running.LameDuckGracePeriod != target.LameDuckGracePeriod {
		add(ChangeLameDuck, lameDuck(running), lameDuck(target))
	}
	if running.Gateway != target.Gateway {
		add(ChangeGateway, onOff(running.Gateway), onOff(target.Gateway))
	}
	if running.Gateway && target.Gateway && running.GatewayRemotes != target.GatewayRemotes {
		add(ChangeGatewayRemotes, running.GatewayRemotes, target.GatewayRemotes)
	}
	if running.Gateway && target.Gateway && running.GatewayTLS != target.GatewayTLS {
		add(ChangeGatewayTLS, onOff(running.GatewayTLS), onOff(target.GatewayTLS))
	}
	if running.GatewayTLS && target.GatewayTLS && running.GatewayCA != target.GatewayCA {
		add(ChangeGatewayCA, "", "")
	}
	if running.LeafnodesAccept != target.LeafnodesAccept {
		add(ChangeLeafnodesAccept, onOff(running.LeafnodesAccept), onOff(target.LeafnodesAccept))
	}
	if running.LeafnodesTLS != target.LeafnodesTLS {
		add(ChangeLeafnodesTLS, onOff(running.LeafnodesTLS), onOff(target.LeafnodesTLS))
	}
	if running.LeafnodeRemotes != target.LeafnodeRemotes {
		add(ChangeLeafnodeRemotes, orNone(running.LeafnodeRemotes), orNone(target.LeafnodeRemotes))
	}
	if running.WebSocket != target.WebSocket {
		add(ChangeWebSocket, orNone(running.WebSocket), orNone(target.WebSocket))
	}
	if running.MQTT != target.MQTT {
		add(ChangeMQTT, orNone(running.MQTT), orNone(target.MQTT))
	}
	if running.MQTT != "" && target.MQTT != "" && running.MQTTDelivery != target.MQTTDelivery {
		add(ChangeMQTTDelivery, running.MQTTDelivery, target.MQTTDelivery)
	}
	if running.MonitorTLS != target.MonitorTLS {
		add(ChangeMonitorTLS, httpOrHTTPS(running.MonitorTLS), httpOrHTTPS(target.MonitorTLS))
	}
	return out
}

// standaloneOr is "standalone" for a server without a cluster name, else
// "cluster <name>".
func standaloneOr(clusterName string) string {
	if clusterName == "" {
		return "standalone"
	}
	return "cluster " + clusterName
}

func httpOrHTTPS(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// lameDuck is "duration 30s, grace period 10s".
func lameDuck(f ConfigFacts) string {
	return fmt.Sprintf("duration %s, grace period %s", orNone(f.LameDuckDuration), orNone(f.LameDuckGracePeriod))
}

// raisedLimits says whether the JetStream limits of target, which differ
// from running's, are raised: both limits are set (not 0) on either side and
// neither goes down. Anything else is lowered (see
// ChangeJetStreamLimitsLowered).
//
// Examples (max_memory_store/max_file_store): 256Mi/1Gi -> 512Mi/2Gi and
// 256Mi/1Gi -> 256Mi/2Gi are raised; 512Mi/2Gi -> 256Mi/2Gi, 256Mi/2Gi ->
// 512Mi/1Gi, 0/1Gi -> 256Mi/1Gi and 256Mi/1Gi -> 0/2Gi are lowered.
func raisedLimits(running, target ConfigFacts) bool {
	if running.MaxMemoryStore == 0 || running.MaxFileStore == 0 || target.MaxMemoryStore == 0 || target.MaxFileStore == 0 {
		return false
	}
	return target.MaxMemoryStore >= running.MaxMemoryStore && target.MaxFileStore >= running.MaxFileStore
}

// short abbreviates an nkey for messages: the first 8 characters and "...".
func short(key string) string {
	if len(key) <= 12 {
		return key
	}
	return key[:8] + "..."
}

// clientTLS is "off", "on" or "on, verifying clients".
func clientTLS(f ConfigFacts) string {
	switch {
	case !f.ClientTLS:
		return "off"
	case f.ClientVerify:
		return "on, verifying clients"
	}
	return "on"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

func sameSet(a, b []string) bool {
	if slices.Equal(a, b) {
		return true
	}
	return slices.Equal(sortedCopy(a), sortedCopy(b))
}

// mergeChanges unions the changes of every server, one per kind, in the order
// of ChangeKinds; for a kind seen with different From values the first
// server's (in the order given) is kept.
func mergeChanges(lists ...[]Change) []Change {
	byKind := map[ChangeKind]Change{}
	for _, l := range lists {
		for _, c := range l {
			if _, ok := byKind[c.Kind]; !ok {
				byKind[c.Kind] = c
			}
		}
	}
	var out []Change
	for _, k := range changeOrder {
		if c, ok := byKind[k]; ok {
			out = append(out, c)
		}
	}
	return out
}

// passwordOrNKey names how the system user authenticates.
func passwordOrNKey(nkey bool) string {
	if nkey {
		return "nkey"
	}
	return "password"
}

// disjoint says whether two RoutesCA lists (comma-separated certificate
// digests) share no certificate: a bundle that keeps a CA the servers
// trust (the first and last steps of a rotation, each a reload) is no
// other CA.
func disjoint(a, b string) bool {
	in := map[string]bool{}
	for _, x := range strings.Split(a, ",") {
		in[x] = true
	}
	for _, y := range strings.Split(b, ",") {
		if in[y] {
			return false
		}
	}
	return true
}

// sameAccounts says whether two configs preload the same accounts: the same
// keys, and under the same operator the same JWTs. Another operator
// re-signs every account, which is that change and not another one.
func sameAccounts(running, target ConfigFacts) bool {
	if running.Operator != target.Operator {
		keys := func(accounts []string) []string {
			out := make([]string, len(accounts))
			for i, a := range accounts {
				out[i], _, _ = strings.Cut(a, "@")
			}
			return out
		}
		return sameSet(keys(running.Accounts), keys(target.Accounts))
	}
	return sameSet(running.Accounts, target.Accounts)
}
