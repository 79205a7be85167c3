package observe

import (
	"time"
)

// Snapshot is what one observation saw of one NATS cluster. The Observer never
// changes a Snapshot after Observe returns it and shares no slice or map with
// any other Snapshot, so it may be handed between goroutines freely; callers
// treat it as read-only. Its fields are exported so that the planner's tests
// can build fixtures directly.
type Snapshot struct {
	// Cluster is the Target's cluster key.
	Cluster string
	// Expected lists the server names the Target expected, in Target order.
	Expected []string
	// Servers holds one entry per expected server, in Target order, whether
	// or not it answered.
	Servers []Server
	// MetaLeader is the JetStream meta leader every answering JetStream
	// server names; empty when none is named or the servers disagree.
	MetaLeader string
	// Groups holds every Raft group seen: the meta group first, then streams
	// and consumers sorted by account and name. Leader and member currency
	// come from the group leader's own report only.
	Groups []Group
	// Streams lists the streams of each JetStream account, sorted by account.
	Streams []AccountStreams
	// Verdict is the Settled condition these facts imply (see Judge).
	Verdict Verdict
	// Started is when the observation began; Took how long it lasted.
	Started time.Time
	Took    time.Duration
	// reports are what the servers (and a meta leader of another cluster)
	// answered, for ViewRemoteMetaLeader.
	reports []*report
}

// Server is what one server reported about itself over its monitoring
// endpoint.
type Server struct {
	// Name is the expected server name (ServerAddr.Name).
	Name string
	// Host is the address the server was asked at.
	Host string
	// Answered is true when /varz answered with the expected server name
	// and /jsz answered too. A server that did not answer is never taken as
	// fine; an address that reaches another server counts as not answering.
	Answered bool
	// Err says why the server did not answer, or what else failed
	// (/routez, /healthz, /gatewayz failures leave Answered true).
	Err string
	// ReportedName is the server_name the server reports; it differs from
	// Name only when the address reached another server.
	ReportedName string
	// ServerID changes on every restart.
	ServerID string
	// Version is the nats-server version, e.g. "2.15.2".
	Version string
	// ConfigRevision is server_metadata.config_revision as the server reports
	// it (/varz "metadata"); empty when absent.
	ConfigRevision string
	// Auth is the auth the server runs.
	Auth Auth
	// Routes lists the names of the servers this server has a working route
	// to, sorted, each once. With route pooling (the default) that is the
	// system account's dedicated route: pooled routes alone form even between
	// servers that refuse each other's system account (measured; see doc.go).
	Routes []string
	// MissingRoutes lists the expected servers (other than itself) this
	// server has no route to, sorted.
	MissingRoutes []string
	// Gateways lists the remote gateways (clusters) with an outbound
	// connection, sorted; empty without gateways.
	Gateways []string
	// LeafRemotes are the servers this server has a leaf connection to as
	// a leaf (it dialled them: /leafz is_spoke), sorted, one per
	// connection; LeafsAccepted counts the leaf connections it accepted as
	// a hub. Both empty without leaf nodes.
	LeafRemotes   []string
	LeafsAccepted int
	// Healthy is true when /healthz answered status ok; HealthError says
	// what /healthz reported otherwise.
	Healthy     bool
	HealthError string
	// JetStream is true when JetStream is enabled on the server.
	JetStream bool
	// Clustered is true when the server is configured with a cluster (route)
	// port, so that JetStream runs a meta group; a standalone server has
	// none, and its streams are led by itself.
	Clustered bool
	// MetaLeader is the meta leader this server names ("" = none known).
	MetaLeader string
	// MetaMembers is the meta group as this server sees it, itself
	// included, sorted by name.
	MetaMembers []string
}

// Auth is the auth mode a server runs, as /varz reports it.
type Auth struct {
	// Operator is the public key of the trusted NATS operator; empty when the
	// server runs without operator-mode auth.
	Operator string
	// OperatorName is the name in the NATS operator JWT.
	OperatorName string
	// SystemAccount is the system account the server runs with. A server
	// without auth still has the default system account "$SYS".
	SystemAccount string
}

// Auth modes returned by Auth.Mode.
const (
	AuthNone     = "none"
	AuthOperator = "operator"
	// AuthUnknown is the mode of a server that did not report its auth
	// (a server that did not answer).
	AuthUnknown = "unknown"
)

// Mode returns AuthOperator when the server trusts a NATS operator, AuthNone
// when it runs without (it still reports its default system account "$SYS"),
// and AuthUnknown when nothing was reported.
func (a Auth) Mode() string {
	switch {
	case a.Operator != "":
		return AuthOperator
	case a.SystemAccount != "":
		return AuthNone
	default:
		return AuthUnknown
	}
}

// GroupKind is the kind of a Raft group.
type GroupKind string

// Kinds of Raft group, in the order Snapshot.Groups lists them.
const (
	GroupMeta     GroupKind = "meta"
	GroupStream   GroupKind = "stream"
	GroupConsumer GroupKind = "consumer"
)

// Group is one Raft group: the JetStream meta group, a stream or a consumer.
type Group struct {
	Kind GroupKind
	// Account is the account id ("$G" without auth, an account public key in
	// operator mode); empty for the meta group.
	Account string
	// AccountName is the account's name as the server reports it (the JWT
	// name tag when set, else the id).
	AccountName string
	// Name is the stream name, or "stream/consumer"; empty for the meta group.
	Name string
	// RaftGroup is the server's internal Raft group name.
	RaftGroup string
	// Leader is the leader's server name, empty when no server answered as
	// the group's leader.
	Leader string
	// Members lists every member, the leader included (always current),
	// sorted by name. With a leader, currency, offline and lag are the
	// leader's view; without one, every member is listed as not current.
	Members []Member
}

// Member is one member of a Raft group.
type Member struct {
	Name    string
	Current bool
	Offline bool
	// Pending is true when the member is assigned but has not joined the
	// group yet (or is being removed).
	Pending bool
	// Lag is how many operations the member is behind the leader.
	Lag uint64
	// StoreBehind is, for a stream group's member other than the leader,
	// how many messages its own store is behind the leader's: the
	// leader's last sequence less the last sequence the member reports on
	// its own /jsz (0 when it is not behind). StoreReported says the
	// member reported the stream. A restarted member copies a stream
	// without its Raft log: the leader reports the same Lag until the copy
	// is done (measured: "lag 1307" for 1.3 s while the member's store went
	// from 0 to 57,966 of 60,000 messages, then current;
	// TestACatchUpShowsInTheMembersOwnStore), so this is what shows the
	// copy advancing.
	StoreBehind   uint64
	StoreReported bool
}

// Label names the group in messages: "meta", "stream $G/ORDERS",
// "consumer $G/ORDERS/worker".
func (g Group) Label() string {
	if g.Kind == GroupMeta {
		return string(GroupMeta)
	}
	account := g.AccountName
	if account == "" {
		account = g.Account
	}
	return string(g.Kind) + " " + account + "/" + g.Name
}

// AccountStreams lists the streams of one account.
type AccountStreams struct {
	Account     string
	AccountName string
	Streams     []StreamInfo
}

// StreamInfo is one stream as its leader (or, leaderless, any member)
// reports it.
type StreamInfo struct {
	Name string
	// Replicas is the number of members of the stream's Raft group.
	Replicas int
	// Messages and Bytes are the stream's state in the report used.
	Messages uint64
	Bytes    uint64
	// Consumers is the number of consumers reported.
	Consumers int
	// LastSeq is the stream's last sequence in the report used.
	LastSeq uint64
}

// Server returns the entry of the named server, and whether there is one.
func (s *Snapshot) Server(name string) (Server, bool) {
	for _, srv := range s.Servers {
		if srv.Name == name {
			return srv, true
		}
	}
	return Server{}, false
}

// StreamCount returns the number of streams over all accounts.
func (s *Snapshot) StreamCount() int {
	n := 0
	for _, a := range s.Streams {
		n += len(a.Streams)
	}
	return n
}
