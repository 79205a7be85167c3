package observe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Verdict is the Settled condition an observation implies.
type Verdict struct {
	// Status is True, False or Unknown.
	Status metav1.ConditionStatus
	// Reason is one of the Settled reasons of pkg/apis/cluster/v1beta1.
	Reason string
	// Message names the servers and up to five groups concerned.
	Message string
}

// Settled reports whether the verdict is True.
func (v Verdict) Settled() bool { return v.Status == metav1.ConditionTrue }

// maxNamed is how many groups a message names before "and N more".
const maxNamed = 5

// Judge returns the Settled verdict of an observation. It is pure and is
// what Observe uses; it is exported so that callers and benchmarks can judge
// hand-made facts.
//
// The checks, most severe first; the first that fails gives the reason:
//
//  1. No server expected: Unknown ObservationFailed (nothing could be asked).
//  2. Every expected server answered, else False ServersSilent. A server
//     that did not answer is never taken as fine.
//  3. The meta group has a leader that no answering clustered JetStream
//     server contradicts (naming another is a split), and every group has a
//     leader, else False GroupsLeaderless.
//  4. Every member of every group is online, and every expected JetStream
//     server is a member of the meta group, else False MembersOffline.
//  5. Every member is current with no lag and none is pending, every
//     clustered JetStream server names the meta leader (a restarted server
//     names none until it has caught up), and no server's /healthz says it
//     is catching up (catchingUp), else False GroupsCatchingUp. The last is
//     what the leader's view misses: a server restarted with an empty store
//     (an emptyDir) is listed current by the stream's leader while it is
//     still copying the stream (measured with nats-server 2.15.2: /healthz
//     says "JetStream stream '$G > ONE' is not current", and a restart of
//     the leader then left the stream without one).
//
// Otherwise True AllGroupsCurrent. Routes are not checked: a cluster can show
// every route while the system account's route is refused, so the meta group
// is what proves the cluster whole (measured; see doc.go).
func Judge(expected []string, servers []Server, groups []Group) Verdict {
	if len(expected) == 0 {
		return Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "no servers to observe"}
	}
	byName := make(map[string]*Server, len(servers))
	for i := range servers {
		byName[servers[i].Name] = &servers[i]
	}

	// 2. Silent servers.
	var silent []string
	for _, name := range expected {
		s := byName[name]
		switch {
		case s == nil:
			silent = append(silent, name+" (not observed)")
		case !s.Answered:
			silent = append(silent, name+" ("+cutMessage(s.Err)+")")
		}
	}
	if len(silent) > 0 {
		return Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent,
			Message: fmt.Sprintf("%d of %d servers did not answer: %s", len(silent), len(expected), strings.Join(silent, ", "))}
	}

	// 3. Meta leader agreement and leaderless groups.
	jetStream := false
	leaders := map[string][]string{} // named meta leader -> servers naming it
	for _, name := range expected {
		if s := byName[name]; s.JetStream && s.Clustered {
			jetStream = true
			leaders[s.MetaLeader] = append(leaders[s.MetaLeader], name)
		}
	}
	var meta *Group
	for i := range groups {
		if groups[i].Kind == GroupMeta {
			meta = &groups[i]
			break
		}
	}
	var leaderless names
	for i := range groups {
		if groups[i].Leader == "" {
			leaderless.add(&groups[i])
		}
	}
	// Servers naming different leaders is a split; servers naming none
	// while the meta group has a leader that the others name are still
	// catching up (a restarted server learns the leader within a second or
	// two), judged with the members below.
	named := len(leaders)
	unaware := leaders[""]
	if unaware != nil {
		named--
	}
	disagree := jetStream && (named > 1 || meta == nil || meta.Leader == "" ||
		(named == 1 && leaders[meta.Leader] == nil) || (named == 0 && unaware != nil))
	if disagree || leaderless.n > 0 {
		var parts []string
		if disagree {
			parts = append(parts, "servers do not name one meta leader: "+describeLeaders(leaders))
		}
		if leaderless.n > 0 {
			parts = append(parts, leaderless.message("without a leader"))
		}
		return Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonGroupsLeaderless, Message: strings.Join(parts, "; ")}
	}

	// 4. Offline members, and expected servers outside the meta group.
	var offline, behind names
	offlineServers, behindServers := map[string]bool{}, map[string]bool{}
	var maxLag uint64
	for i := range groups {
		g := &groups[i]
		isOffline, isBehind := false, false
		for _, m := range g.Members {
			switch {
			case m.Offline:
				isOffline = true
				offlineServers[m.Name] = true
			case !m.Current || m.Lag > 0 || m.Pending:
				isBehind = true
				behindServers[m.Name] = true
				maxLag = max(maxLag, m.Lag)
			}
		}
		if isOffline {
			offline.add(g)
		}
		if isBehind {
			behind.add(g)
		}
	}
	var outside []string
	if jetStream && meta != nil {
		for _, name := range expected {
			if s := byName[name]; !s.JetStream || !s.Clustered {
				continue
			}
			if !slices.ContainsFunc(meta.Members, func(m Member) bool { return m.Name == name }) {
				outside = append(outside, name)
			}
		}
	}
	if offline.n > 0 || len(outside) > 0 {
		var parts []string
		if len(outside) > 0 {
			parts = append(parts, strings.Join(outside, ", ")+" not in the meta group")
		}
		if offline.n > 0 {
			parts = append(parts, strings.Join(sortedKeys(offlineServers), ", ")+" offline in "+offline.message(""))
		}
		return Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonMembersOffline, Message: strings.Join(parts, "; ")}
	}

	// 5. Members not current, servers not naming the meta leader yet, and
	// servers whose /healthz says they are catching up.
	var unhealthy []string
	for _, name := range expected {
		if s := byName[name]; s.JetStream && catchingUp(s) {
			unhealthy = append(unhealthy, name+" reports "+cutMessage(s.HealthError))
		}
	}
	if behind.n > 0 || (jetStream && unaware != nil) || len(unhealthy) > 0 {
		var parts []string
		if jetStream && unaware != nil {
			parts = append(parts, strings.Join(unaware, ", ")+" not naming the meta leader "+meta.Leader+" yet")
		}
		parts = append(parts, unhealthy...)
		if behind.n > 0 {
			msg := strings.Join(sortedKeys(behindServers), ", ") + " catching up in " + behind.message("")
			if maxLag > 0 {
				msg += " (lag up to " + strconv.FormatUint(maxLag, 10) + ")"
			}
			parts = append(parts, msg)
		}
		return Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonGroupsCatchingUp, Message: strings.Join(parts, "; ")}
	}

	return Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent,
		Message: fmt.Sprintf("every Raft group has a leader and every member is current (%s, %s)", count(len(expected), "server"), count(len(groups), "group"))}
}

// catchingUp says a server's /healthz reports one of its streams or
// consumers catching up, or its meta group not current: nats-server's
// "JetStream stream '<account> > <stream>' is not current: stream catching
// up" (and the same of a consumer) and "JetStream is not current with the
// meta leader". Other /healthz errors (a write error, an expired account)
// are not judged here: they are no catch-up a step could wait for.
func catchingUp(s *Server) bool {
	if s.Healthy || s.HealthError == "" {
		return false
	}
	e := s.HealthError
	return (strings.HasPrefix(e, "JetStream stream '") || strings.HasPrefix(e, "JetStream consumer '")) && strings.HasSuffix(e, "catching up") ||
		strings.HasPrefix(e, "JetStream is not current with the meta leader")
}

// names counts groups and keeps the labels of the first few.
type names struct {
	n     int
	first []string
}

func (ns *names) add(g *Group) {
	ns.n++
	if len(ns.first) < maxNamed {
		ns.first = append(ns.first, g.Label())
	}
}

// message reads "3 groups without a leader: meta, stream $G/A, ... and 1 more".
func (ns *names) message(what string) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(ns.n))
	if ns.n == 1 {
		b.WriteString(" group")
	} else {
		b.WriteString(" groups")
	}
	if what != "" {
		b.WriteString(" " + what)
	}
	b.WriteString(": ")
	b.WriteString(strings.Join(ns.first, ", "))
	if more := ns.n - len(ns.first); more > 0 {
		b.WriteString(" and " + strconv.Itoa(more) + " more")
	}
	return b.String()
}

// describeLeaders reads "demo-0, demo-1 name demo-1; demo-2 names none".
func describeLeaders(leaders map[string][]string) string {
	parts := make([]string, 0, len(leaders))
	for _, leader := range sortedKeys(leaders) {
		servers := leaders[leader]
		verb := " name "
		if len(servers) == 1 {
			verb = " names "
		}
		if leader == "" {
			leader = "none"
		}
		parts = append(parts, strings.Join(servers, ", ")+verb+leader)
	}
	return strings.Join(parts, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cutMessage keeps error text in messages short.
func cutMessage(s string) string {
	if s == "" {
		return "no answer"
	}
	const limit = 200
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}

// count says n things in words: "1 group", "3 servers".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
