package observe

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// jszReport builds a report of one server holding one stream ORDERS in $G
// with the given view of its Raft group.
func jszReport(name string, meta *wireMeta, cluster *wireCluster) *report {
	return &report{
		addr: ServerAddr{Name: name, Host: "127.0.0.1"},
		varz: &wireVarz{Name: name, ID: "ID-" + name, SystemAccount: "$SYS"},
		jsz: []*wireJsz{{
			Meta: meta, Total: 1,
			Accounts: []*wireAccount{{Name: "$G", ID: "$G", Streams: []*wireStream{{Name: "ORDERS", Cluster: cluster}}}},
		}},
	}
}

// lastSeq sets the last sequence of the report's ORDERS.
func lastSeq(r *report, seq uint64) *report {
	r.jsz[0].Accounts[0].Streams[0].State.LastSeq = seq
	return r
}

func TestBuildGroups(t *testing.T) {
	peer := func(name string, current bool, lag uint64) *wirePeer {
		return &wirePeer{Name: name, Current: current, Lag: lag}
	}
	meta := &wireMeta{Leader: "demo-0", Replicas: []*wirePeer{peer("demo-1", true, 0)}}
	for _, tc := range []struct {
		name    string
		reports []*report
		want    Group
	}{
		{
			name: "the leader's view of its members is used, not a follower's",
			reports: []*report{
				jszReport("demo-0", meta, &wireCluster{Leader: "demo-1", Replicas: []*wirePeer{peer("demo-1", false, 0)}}),
				jszReport("demo-1", meta, &wireCluster{Leader: "demo-1", Replicas: []*wirePeer{peer("demo-0", false, 7)}}),
			},
			want: Group{Kind: GroupStream, Account: "$G", AccountName: "$G", Name: "ORDERS", Leader: "demo-1",
				Members: []Member{{Name: "demo-0", Lag: 7, StoreReported: true}, {Name: "demo-1", Current: true}}},
		},
		{
			name: "a group whose named leader did not answer is leaderless",
			reports: []*report{
				jszReport("demo-0", meta, &wireCluster{Leader: "demo-2", Replicas: []*wirePeer{peer("demo-2", true, 0), peer("demo-1", true, 0)}}),
				{addr: ServerAddr{Name: "demo-2"}, fatal: "connection refused"},
			},
			want: Group{Kind: GroupStream, Account: "$G", AccountName: "$G", Name: "ORDERS",
				Members: []Member{{Name: "demo-0"}, {Name: "demo-1"}, {Name: "demo-2"}}},
		},
		{
			name: "of two servers claiming to lead, the one the others name wins",
			reports: []*report{
				jszReport("demo-0", meta, &wireCluster{Leader: "demo-0", Replicas: []*wirePeer{peer("demo-1", true, 0)}}),
				jszReport("demo-1", meta, &wireCluster{Leader: "demo-1", Replicas: []*wirePeer{peer("demo-0", true, 0), peer("demo-2", true, 0)}}),
				jszReport("demo-2", meta, &wireCluster{Leader: "demo-1", Replicas: []*wirePeer{peer("demo-1", true, 0)}}),
			},
			want: Group{Kind: GroupStream, Account: "$G", AccountName: "$G", Name: "ORDERS", Leader: "demo-1",
				Members: []Member{{Name: "demo-0", Current: true, StoreReported: true}, {Name: "demo-1", Current: true}, {Name: "demo-2", Current: true, StoreReported: true}}},
		},
		{
			name: "a member copying the stream is as far behind as its own store says, the leader's lag aside",
			reports: []*report{
				lastSeq(jszReport("demo-0", meta, &wireCluster{Leader: "demo-0", Replicas: []*wirePeer{peer("demo-1", false, 1307), peer("demo-2", false, 1307)}}), 60000),
				lastSeq(jszReport("demo-1", meta, &wireCluster{Leader: "demo-0"}), 15859),
				// demo-2 has not joined the stream yet: it reports nothing of it.
				{addr: ServerAddr{Name: "demo-2", Host: "127.0.0.1"}, varz: &wireVarz{Name: "demo-2"}, jsz: []*wireJsz{{Meta: meta, Total: 1, Accounts: []*wireAccount{{Name: "$G", ID: "$G"}}}}},
			},
			want: Group{Kind: GroupStream, Account: "$G", AccountName: "$G", Name: "ORDERS", Leader: "demo-0",
				Members: []Member{{Name: "demo-0", Current: true}, {Name: "demo-1", Lag: 1307, StoreBehind: 44141, StoreReported: true}, {Name: "demo-2", Lag: 1307}}},
		},
		{
			name: "a peer whose name the leader does not know is named by its peer id",
			reports: []*report{
				jszReport("demo-0", meta, &wireCluster{Leader: "demo-0", Replicas: []*wirePeer{{Name: "Server name unknown at this time (peerID: abc)", Peer: "abc", Offline: true}}}),
			},
			want: Group{Kind: GroupStream, Account: "$G", AccountName: "$G", Name: "ORDERS", Leader: "demo-0",
				Members: []Member{{Name: "demo-0", Current: true}, {Name: "peer:abc", Offline: true}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, _ := buildGroups(tc.reports)
			if len(groups) != 2 || groups[0].Kind != GroupMeta {
				t.Fatalf("groups %+v, want meta and ORDERS", groups)
			}
			if diff := cmp.Diff(tc.want, groups[1]); diff != "" {
				t.Errorf("ORDERS (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildServerRoutes(t *testing.T) {
	r := &report{
		addr: ServerAddr{Name: "demo-0"},
		varz: &wireVarz{Name: "demo-0", SystemAccount: "$SYS"},
	}
	r.varz.Cluster.PoolSize = 3
	r.routez = &wireRoutez{}
	for _, rt := range []struct{ name, account string }{
		{"demo-1", ""}, {"demo-1", "$SYS"}, {"demo-2", ""}, {"demo-2", ""}, {"demo-10", "$SYS"},
	} {
		r.routez.Routes = append(r.routez.Routes, &wireRoute{RemoteName: rt.name, Account: rt.account})
	}
	s := buildServer(r, []string{"demo-0", "demo-1", "demo-2", "demo-10"})
	if diff := cmp.Diff([]string{"demo-1", "demo-10"}, s.Routes); diff != "" {
		t.Errorf("a peer with pooled routes only is not routed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"demo-2"}, s.MissingRoutes); diff != "" {
		t.Errorf("missing routes (-want +got):\n%s", diff)
	}
}
