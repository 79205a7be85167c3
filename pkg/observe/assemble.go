package observe

import (
	"cmp"
	"slices"
	"strings"
)

// report is what one server answered, decoded; the Observer fills it and
// the functions in this file turn reports into a Snapshot's facts. They are
// pure, so the fuzz test and the benchmarks drive them without a network.
type report struct {
	addr     ServerAddr
	varz     *wireVarz
	jsz      []*wireJsz // pages, in order
	routez   *wireRoutez
	healthz  *wireHealthz
	gatewayz *wireGatewayz
	leafz    *wireLeafz
	// fatal makes the server count as silent (varz or jsz failed).
	fatal string
	// soft lists failures of the endpoints that are not essential.
	soft []string
}

// reporter is the server name the report speaks for: the name the server
// reports, else the expected one.
func (r *report) reporter() string {
	if r.varz != nil && r.varz.Name != "" {
		return r.varz.Name
	}
	return r.addr.Name
}

// buildServer turns one report into a Server. expected is every expected
// server name, used for MissingRoutes.
func buildServer(r *report, expected []string) Server {
	s := Server{Name: r.addr.Name, Host: r.addr.Host}
	errs := make([]string, 0, 1+len(r.soft))
	if r.fatal != "" {
		errs = append(errs, r.fatal)
	}
	errs = append(errs, r.soft...)
	s.Err = strings.Join(errs, "; ")
	if v := r.varz; v != nil {
		s.ReportedName = v.Name
		s.ServerID = v.ID
		s.Version = v.Version
		s.ConfigRevision = v.Metadata[MetadataConfigRevision]
		s.Auth.SystemAccount = v.SystemAccount
		s.Clustered = v.Cluster.Port != 0
		for _, oc := range v.TrustedOperatorsClaim {
			if oc != nil && oc.Subject != "" {
				s.Auth.Operator, s.Auth.OperatorName = oc.Subject, oc.Name
				break
			}
		}
	}
	s.Answered = r.fatal == "" && r.varz != nil
	if r.routez != nil {
		// With route pooling (pool_size > 0, the default) the system account
		// has a dedicated route, and a server that refuses it (the other
		// side runs another auth) still keeps the pooled ones. Only the
		// system account's route shows the peer can be a cluster member.
		pinned := r.varz != nil && r.varz.Cluster.PoolSize > 0 && r.varz.SystemAccount != ""
		names := make([]string, 0, len(r.routez.Routes))
		for _, rt := range r.routez.Routes {
			if rt == nil || rt.RemoteName == "" || (pinned && rt.Account != r.varz.SystemAccount) {
				continue
			}
			names = append(names, rt.RemoteName)
		}
		s.Routes = sortedUnique(names)
	}
	if s.Answered && r.routez != nil {
		self := r.reporter()
		for _, name := range expected {
			if name != self && name != s.Name {
				if _, found := slices.BinarySearch(s.Routes, name); !found {
					s.MissingRoutes = append(s.MissingRoutes, name)
				}
			}
		}
		slices.Sort(s.MissingRoutes)
	}
	if g := r.gatewayz; g != nil {
		for name, out := range g.Outbound {
			if out != nil && out.Connection != nil {
				s.Gateways = append(s.Gateways, name)
			}
		}
		slices.Sort(s.Gateways)
	}
	if l := r.leafz; l != nil {
		for _, leaf := range l.Leafs {
			if leaf == nil {
				continue
			}
			if leaf.IsSpoke {
				s.LeafRemotes = append(s.LeafRemotes, leaf.Name)
			} else {
				s.LeafsAccepted++
			}
		}
		slices.Sort(s.LeafRemotes)
	}
	if h := r.healthz; h != nil {
		s.Healthy = h.Status == "ok"
		s.HealthError = h.Error
	}
	if len(r.jsz) > 0 && r.jsz[0] != nil && !r.jsz[0].Disabled {
		s.JetStream = true
		if m := r.jsz[0].Meta; m != nil {
			s.MetaLeader = m.Leader
			members := []string{r.reporter()}
			for _, p := range m.Replicas {
				if p != nil && p.Name != "" {
					members = append(members, p.Name)
				}
			}
			s.MetaMembers = sortedUnique(members)
		}
	}
	return s
}

// view is one server's report of one Raft group.
type view struct {
	reporter string
	cluster  *wireCluster
	stream   *wireStream // for stream groups: the reported stream detail
}

// groupKey identifies a Raft group across servers.
type groupKey struct {
	kind    GroupKind
	account string
	name    string
}

// pending is a group being assembled from the views of every server.
type pending struct {
	key         groupKey
	accountName string
	views       []view
}

// buildGroups gathers every server's view of every Raft group and keeps, for
// each group, the report of its leader (measured: a follower's view of
// its peers' currency is not reliable). It returns the groups sorted (meta
// first, then by kind, account and name) and the streams of each account.
func buildGroups(reports []*report) ([]Group, []AccountStreams) {
	byKey := map[groupKey]*pending{}
	var order []*pending
	add := func(k groupKey, accountName string, v view) {
		p := byKey[k]
		if p == nil {
			p = &pending{key: k, accountName: accountName}
			byKey[k] = p
			order = append(order, p)
		}
		p.views = append(p.views, v)
	}
	for _, r := range reports {
		if r == nil || r.fatal != "" {
			continue
		}
		reporter := r.reporter()
		for i, page := range r.jsz {
			if page == nil || page.Disabled {
				continue
			}
			if i == 0 && page.Meta != nil {
				add(groupKey{kind: GroupMeta}, "", view{reporter: reporter, cluster: &wireCluster{
					Name: page.Meta.Name, Leader: page.Meta.Leader, Replicas: page.Meta.Replicas,
				}})
			}
			for _, acc := range page.Accounts {
				if acc == nil {
					continue
				}
				account := cmp.Or(acc.ID, acc.Name)
				for _, st := range acc.Streams {
					if st == nil || st.Name == "" {
						continue
					}
					add(groupKey{GroupStream, account, st.Name}, acc.Name, view{reporter: reporter, cluster: st.Cluster, stream: st})
					for _, c := range st.Consumers {
						if c == nil || c.Name == "" {
							continue
						}
						add(groupKey{GroupConsumer, account, st.Name + "/" + c.Name}, acc.Name, view{reporter: reporter, cluster: c.Cluster})
					}
				}
			}
		}
	}

	groups := make([]Group, 0, len(order))
	streams := map[string]*AccountStreams{}
	for _, p := range order {
		g, lead := resolve(p)
		groups = append(groups, g)
		if g.Kind != GroupStream {
			continue
		}
		as := streams[g.Account]
		if as == nil {
			as = &AccountStreams{Account: g.Account, AccountName: g.AccountName}
			streams[g.Account] = as
		}
		info := StreamInfo{Name: g.Name, Replicas: len(g.Members)}
		if lead.stream != nil {
			info.Messages, info.Bytes, info.Consumers, info.LastSeq = lead.stream.State.Msgs, lead.stream.State.Bytes, lead.stream.State.Consumers, lead.stream.State.LastSeq
		}
		as.Streams = append(as.Streams, info)
	}
	slices.SortFunc(groups, compareGroups)
	accounts := make([]AccountStreams, 0, len(streams))
	for _, as := range streams {
		slices.SortFunc(as.Streams, func(a, b StreamInfo) int { return cmp.Compare(a.Name, b.Name) })
		accounts = append(accounts, *as)
	}
	slices.SortFunc(accounts, func(a, b AccountStreams) int { return cmp.Compare(a.Account, b.Account) })
	return groups, accounts
}

var kindOrder = map[GroupKind]int{GroupMeta: 0, GroupStream: 1, GroupConsumer: 2}

func compareGroups(a, b Group) int {
	return cmp.Or(
		cmp.Compare(kindOrder[a.Kind], kindOrder[b.Kind]),
		cmp.Compare(a.Account, b.Account),
		cmp.Compare(a.Name, b.Name),
	)
}

// resolve picks the leader's own report of a group. A server that names
// itself leader is a candidate; when several do (a stale leader that has not
// noticed a newer term), the one most servers name wins, ties broken by
// name. Without a candidate the group is leaderless and its members are the
// union of every view, none current. It returns the group and the view used
// (zero without a leader, but then the first view's stream detail).
func resolve(p *pending) (Group, view) {
	g := Group{Kind: p.key.kind, Account: p.key.account, AccountName: p.accountName, Name: p.key.name}
	var lead view
	found := false
	votes := map[string]int{}
	for _, v := range p.views {
		if v.cluster != nil && v.cluster.Leader != "" {
			votes[v.cluster.Leader]++
		}
	}
	for _, v := range p.views {
		if v.cluster == nil {
			// Standalone JetStream: no Raft group, the server leads.
			v = view{reporter: v.reporter, cluster: &wireCluster{Leader: v.reporter}, stream: v.stream}
		}
		if v.cluster.Leader != v.reporter {
			continue
		}
		if !found || votes[v.reporter] > votes[lead.reporter] ||
			(votes[v.reporter] == votes[lead.reporter] && v.reporter < lead.reporter) {
			lead, found = v, true
		}
	}
	if found {
		g.Leader = lead.reporter
		g.RaftGroup = lead.cluster.RaftGroup
		g.Members = append(g.Members, Member{Name: lead.reporter, Current: true})
		for _, peer := range lead.cluster.Replicas {
			if peer == nil || peer.Name == lead.reporter {
				continue
			}
			m := Member{Name: peerName(peer), Current: peer.Current, Offline: peer.Offline, Pending: peer.Pending, Lag: peer.Lag}
			m.StoreBehind, m.StoreReported = storeBehind(p.views, m.Name, lead)
			g.Members = append(g.Members, m)
		}
	} else {
		names := make([]string, 0, len(p.views)*3)
		for _, v := range p.views {
			names = append(names, v.reporter)
			if v.cluster == nil {
				continue
			}
			if g.RaftGroup == "" {
				g.RaftGroup = v.cluster.RaftGroup
			}
			for _, peer := range v.cluster.Replicas {
				if peer != nil {
					names = append(names, peerName(peer))
				}
			}
		}
		for _, name := range sortedUnique(names) {
			g.Members = append(g.Members, Member{Name: name})
		}
		if len(p.views) > 0 {
			lead = p.views[0]
		}
	}
	slices.SortFunc(g.Members, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return g, lead
}

// storeBehind is how many messages the named member's own report of a
// stream puts it behind the leader's report, and whether it reported the
// stream (stream groups only).
func storeBehind(views []view, member string, lead view) (uint64, bool) {
	if lead.stream == nil {
		return 0, false
	}
	for _, v := range views {
		if v.reporter != member || v.stream == nil {
			continue
		}
		if last, own := lead.stream.State.LastSeq, v.stream.State.LastSeq; last > own {
			return last - own, true
		}
		return 0, true
	}
	return 0, false
}

// peerName is the peer's server name, or its peer id when the reporting
// server does not know the name yet.
func peerName(p *wirePeer) string {
	if p.Name == "" || strings.HasPrefix(p.Name, "Server name unknown") {
		if p.Peer != "" {
			return "peer:" + p.Peer
		}
	}
	return p.Name
}

func sortedUnique(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}
