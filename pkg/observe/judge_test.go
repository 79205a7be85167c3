package observe

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Fixture builders for Judge.

func answering(name, metaLeader string) Server {
	return Server{Name: name, Answered: true, JetStream: true, Clustered: true, MetaLeader: metaLeader}
}

func silentServer(name, err string) Server { return Server{Name: name, Err: err} }

func current(names ...string) []Member {
	var ms []Member
	for _, n := range names {
		ms = append(ms, Member{Name: n, Current: true})
	}
	return ms
}

func metaGroup(leader string, members ...Member) Group {
	return Group{Kind: GroupMeta, Leader: leader, Members: members}
}

func streamGroup(name, leader string, members ...Member) Group {
	return Group{Kind: GroupStream, Account: "$G", AccountName: "$G", Name: name, Leader: leader, Members: members}
}

func with(ms []Member, name string, f func(*Member)) []Member {
	out := append([]Member(nil), ms...)
	for i := range out {
		if out[i].Name == name {
			f(&out[i])
		}
	}
	return out
}

func TestJudge(t *testing.T) {
	three := []string{"demo-0", "demo-1", "demo-2"}
	all := current(three...)
	healthy := []Server{answering("demo-0", "demo-0"), answering("demo-1", "demo-0"), answering("demo-2", "demo-0")}
	for _, tc := range []struct {
		name     string
		expected []string
		servers  []Server
		groups   []Group
		status   metav1.ConditionStatus
		reason   string
		message  string // checked when set
	}{
		{
			name:   "nothing expected is Unknown ObservationFailed",
			status: metav1.ConditionUnknown, reason: clusterv1beta1.ReasonObservationFailed,
		},
		{
			name:     "every server answering and every group current is Settled",
			expected: three, servers: healthy,
			groups: []Group{metaGroup("demo-0", all...), streamGroup("ORDERS", "demo-1", all...)},
			status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonAllGroupsCurrent,
			message: "every Raft group has a leader and every member is current (3 servers, 2 groups)",
		},
		{
			name:     "one group is said in the singular",
			expected: three, servers: healthy,
			groups: []Group{metaGroup("demo-0", all...)},
			status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonAllGroupsCurrent,
			message: "every Raft group has a leader and every member is current (3 servers, 1 group)",
		},
		{
			name:     "a server that did not answer is ServersSilent even when every group looks current",
			expected: three,
			servers:  []Server{healthy[0], healthy[1], silentServer("demo-2", "connection refused")},
			groups:   []Group{metaGroup("demo-0", all...)},
			status:   metav1.ConditionFalse, reason: clusterv1beta1.ReasonServersSilent,
			message: "1 of 3 servers did not answer: demo-2 (connection refused)",
		},
		{
			name:     "an expected server missing from the observation is ServersSilent",
			expected: three, servers: healthy[:2],
			groups: []Group{metaGroup("demo-0", all...)},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonServersSilent,
		},
		{
			name:     "every server silent is ServersSilent, not Unknown",
			expected: three,
			servers:  []Server{silentServer("demo-0", "timeout"), silentServer("demo-1", "timeout"), silentServer("demo-2", "timeout")},
			status:   metav1.ConditionFalse, reason: clusterv1beta1.ReasonServersSilent,
		},
		{
			name:     "servers naming different meta leaders is GroupsLeaderless",
			expected: three,
			servers:  []Server{answering("demo-0", "demo-0"), answering("demo-1", "demo-0"), answering("demo-2", "demo-2")},
			groups:   []Group{metaGroup("demo-0", all...)},
			status:   metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
			message: "servers do not name one meta leader: demo-0, demo-1 name demo-0; demo-2 names demo-2",
		},
		{
			name:     "no server naming a meta leader is GroupsLeaderless",
			expected: three,
			servers:  []Server{answering("demo-0", ""), answering("demo-1", ""), answering("demo-2", "")},
			groups:   []Group{metaGroup("", all...)},
			status:   metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
			message: "servers do not name one meta leader: demo-0, demo-1, demo-2 name none; 1 group without a leader: meta",
		},
		{
			name:     "servers naming a leader the meta group's report does not confirm is GroupsLeaderless",
			expected: three,
			servers:  []Server{answering("demo-0", "demo-1"), answering("demo-1", "demo-1"), answering("demo-2", "demo-1")},
			groups:   []Group{metaGroup("demo-0", all...)},
			status:   metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
		},
		{
			name:     "a restarted server not naming the meta leader yet is GroupsCatchingUp",
			expected: three,
			servers:  []Server{answering("demo-0", "demo-0"), answering("demo-1", "demo-0"), answering("demo-2", "")},
			groups:   []Group{metaGroup("demo-0", all...)},
			status:   metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsCatchingUp,
			message: "demo-2 not naming the meta leader demo-0 yet",
		},
		{
			name:     "a stream without a leader is GroupsLeaderless",
			expected: three, servers: healthy,
			groups: []Group{metaGroup("demo-0", all...), streamGroup("ORDERS", "", current()...)},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
			message: "1 group without a leader: stream $G/ORDERS",
		},
		{
			name:     "leaderless beats offline",
			expected: three, servers: healthy,
			groups: []Group{
				metaGroup("demo-0", with(all, "demo-2", func(m *Member) { m.Offline, m.Current = true, false })...),
				streamGroup("ORDERS", ""),
			},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
		},
		{
			name:     "an offline member is MembersOffline naming the server",
			expected: three, servers: healthy,
			groups: []Group{
				metaGroup("demo-0", all...),
				streamGroup("ORDERS", "demo-0", with(all, "demo-2", func(m *Member) { m.Offline, m.Current = true, false })...),
			},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonMembersOffline,
			message: "demo-2 offline in 1 group: stream $G/ORDERS",
		},
		{
			name:     "an expected server outside the meta group is MembersOffline",
			expected: three, servers: healthy,
			groups: []Group{metaGroup("demo-0", current("demo-0", "demo-1")...)},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonMembersOffline,
			message: "demo-2 not in the meta group",
		},
		{
			name:     "a member behind is GroupsCatchingUp with its lag",
			expected: three, servers: healthy,
			groups: []Group{
				metaGroup("demo-0", all...),
				streamGroup("ORDERS", "demo-0", with(all, "demo-1", func(m *Member) { m.Current, m.Lag = false, 42 })...),
			},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsCatchingUp,
			message: "demo-1 catching up in 1 group: stream $G/ORDERS (lag up to 42)",
		},
		{
			name:     "a server whose /healthz says a stream is not current is GroupsCatchingUp, though its leader lists it current",
			expected: three,
			servers: []Server{answering("demo-0", "demo-0"), answering("demo-1", "demo-0"), func() Server {
				s := answering("demo-2", "demo-0")
				s.HealthError = "JetStream stream '$G > ONE' is not current: stream catching up"
				return s
			}()},
			groups: []Group{metaGroup("demo-0", all...), streamGroup("ONE", "demo-0", all...)},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsCatchingUp,
			message: "demo-2 reports JetStream stream '$G > ONE' is not current: stream catching up",
		},
		{
			name:     "another /healthz error is not judged",
			expected: three,
			servers: []Server{answering("demo-0", "demo-0"), answering("demo-1", "demo-0"), func() Server {
				s := answering("demo-2", "demo-0")
				s.HealthError = "JetStream account \"A\" is expired"
				return s
			}()},
			groups: []Group{metaGroup("demo-0", all...)},
			status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonAllGroupsCurrent,
		},
		{
			name:     "a member current but with lag is GroupsCatchingUp",
			expected: three, servers: healthy,
			groups: []Group{metaGroup("demo-0", with(all, "demo-1", func(m *Member) { m.Lag = 1 })...)},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsCatchingUp,
		},
		{
			name:     "a pending member is GroupsCatchingUp",
			expected: three, servers: healthy,
			groups: []Group{metaGroup("demo-0", with(all, "demo-1", func(m *Member) { m.Pending = true })...)},
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsCatchingUp,
		},
		{
			name:     "a message names up to five groups and counts the rest",
			expected: three, servers: healthy,
			groups: func() []Group {
				gs := []Group{metaGroup("demo-0", all...)}
				for i := range 8 {
					gs = append(gs, streamGroup(fmt.Sprintf("S%d", i), ""))
				}
				return gs
			}(),
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
			message: "8 groups without a leader: stream $G/S0, stream $G/S1, stream $G/S2, stream $G/S3, stream $G/S4 and 3 more",
		},
		{
			name:     "a cluster without JetStream is Settled on answers alone",
			expected: three,
			servers:  []Server{{Name: "demo-0", Answered: true}, {Name: "demo-1", Answered: true}, {Name: "demo-2", Answered: true}},
			status:   metav1.ConditionTrue, reason: clusterv1beta1.ReasonAllGroupsCurrent,
		},
		{
			name:     "a standalone JetStream server leading its streams is Settled",
			expected: []string{"demo-0"},
			servers:  []Server{{Name: "demo-0", Answered: true, JetStream: true}},
			groups:   []Group{streamGroup("ORDERS", "demo-0", current("demo-0")...)},
			status:   metav1.ConditionTrue, reason: clusterv1beta1.ReasonAllGroupsCurrent,
		},
		{
			name:     "JetStream servers without a meta group is GroupsLeaderless",
			expected: three, servers: healthy,
			status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGroupsLeaderless,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.expected, tc.servers, tc.groups)
			if v.Status != tc.status || v.Reason != tc.reason {
				t.Errorf("Judge() = %s %s (%s), want %s %s", v.Status, v.Reason, v.Message, tc.status, tc.reason)
			}
			if tc.message != "" {
				if diff := cmp.Diff(tc.message, v.Message); diff != "" {
					t.Errorf("message (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// groups10k makes the meta group and 9,999 stream and consumer groups of
// three current members each.
func groups10k() ([]string, []Server, []Group) {
	names := []string{"demo-0", "demo-1", "demo-2"}
	servers := []Server{answering("demo-0", "demo-0"), answering("demo-1", "demo-0"), answering("demo-2", "demo-0")}
	groups := []Group{metaGroup("demo-0", current(names...)...)}
	for i := range 9999 {
		kind := GroupStream
		if i%2 == 1 {
			kind = GroupConsumer
		}
		groups = append(groups, Group{Kind: kind, Account: "$G", AccountName: "$G", Name: fmt.Sprintf("S%05d", i), Leader: names[i%3], Members: current(names...)})
	}
	return names, servers, groups
}

func BenchmarkJudge10000Groups(b *testing.B) {
	names, servers, groups := groups10k()
	b.Run("settled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v := Judge(names, servers, groups); !v.Settled() {
				b.Fatal(v)
			}
		}
	})
	// Every group with a member behind: the slowest path.
	behind := make([]Group, len(groups))
	for i, g := range groups {
		g.Members = with(g.Members, "demo-2", func(m *Member) { m.Current, m.Lag = false, uint64(i) })
		behind[i] = g
	}
	b.Run("all catching up", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v := Judge(names, servers, behind); v.Reason != clusterv1beta1.ReasonGroupsCatchingUp {
				b.Fatal(v)
			}
		}
	})
}
