package matrix

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	. "github.com/nats-operator/nats-operator/pkg/rollout"
)

// TestRouteCompatibilityMatrix establishes, with real nats-server processes,
// which changes roll one server at a time, which split a cluster, and which
// leave JetStream's state behind, and asserts that the planner's
// classification (the effects table in changes.go) is exactly that.
//
// Every case is a pair of NatsCluster specs (matrix_cases_test.go), rendered
// by pkg/render; each server's config is localized for loopback by
// rendertest.LocalizeConfig. Classify must find exactly the case's change
// kinds between the rendered facts. Three servers start on the old spec and
// an R3 stream is written; then the servers move to the new spec one at a
// time (2 old + 1 new, 1 old + 2 new, all new), each keeping its store
// directory. At every stage the test records whether every server routes to
// every other, whether the JetStream meta group has one leader with every
// member current (from the leader's view, the only reliable one), and
// whether the stream takes writes through every server with its replicas
// current; at the end, whether the stream and its messages are still there.
// A change splits when a mixed stage fails any of these; it resets JetStream
// when the stream is gone once all servers run the new spec. Both must equal
// EffectOf of every kind the case names.
func TestRouteCompatibilityMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	bins := map[string]string{"2.15.1": natsBinary(t, "2.15.1"), "2.15.2": natsBinary(t, "2.15.2")}
	tr := newMatrixTrust(t)
	cases := matrixCases(t, tr)

	var mu sync.Mutex
	rows := map[string]matrixRow{}
	t.Run("changes", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				locals, routes, old, new := matrixServers(t, c)
				if got := classifyRendered(t, old, new); !slices.Equal(got, c.kinds) {
					t.Fatalf("Classify(old, new) = %v, want exactly %v", got, c.kinds)
				}
				row := runMatrixRow(t, locals,
					serverRuns(t, c.old, old, bins, locals, routes, tr),
					serverRuns(t, c.new, new, bins, locals, routes, tr))
				mu.Lock()
				rows[c.name] = row
				mu.Unlock()
			})
		}
	})

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-40s | %-24s | %-13s | %-13s | %-7s | %-11s | %-24s | %s\n", "change", "kind", "2 old + 1 new", "1 old + 2 new", "all new", "stream kept", "found", "planner")
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 160))
	for _, c := range cases {
		row, ok := rows[c.name]
		if !ok {
			continue
		}
		kinds := c.kinds
		if len(kinds) == 0 {
			kinds = []ChangeKind{noKind}
		}
		for i, k := range kinds {
			e := EffectOf(k)
			name := c.name
			if i > 0 {
				name = ""
			}
			fmt.Fprintf(&b, "%-40s | %-24s | %-13s | %-13s | %-7s | %-11s | %-24s | %s\n", name, k,
				row.phases[0], row.phases[1], row.phases[2], row.streamKeptString(), classification(row.splits, row.resets), classification(e.Splits, e.ResetsJetStream))
			if e.Splits != row.splits || e.ResetsJetStream != row.resets {
				t.Errorf("%s (%s): the planner classifies it %s, real servers %s", c.name, k, classification(e.Splits, e.ResetsJetStream), classification(row.splits, row.resets))
			}
		}
	}
	b.WriteString("(each stage: R = every server routes to every other, M = one meta leader with every member current, W = the stream takes writes through every server with its replicas current; - = failed, . = not applicable; " +
		"kind (none): a difference that is no fact, which must roll one at a time)\n")
	fmt.Fprintf(&b, "\n%-29s | %-14s | %-14s | %s\n", "change (system user)", "2 old + 1 new", "1 old + 2 new", "all new")
	for _, c := range cases {
		if row, ok := rows[c.name]; ok && row.systemUserApplies {
			fmt.Fprintf(&b, "%-29s | %-14s | %-14s | %s\n", c.name, row.systemUser[0], row.systemUser[1], row.systemUser[2])
		}
	}
	b.WriteString("(per server 0,1,2: a = /varz auth_required (. = not), g = a client without credentials lands in $G, s = the system user lands in $SYS and every server answers its ping (. = no system user); - = failed)\n")
	t.Log(b.String())
	if out := os.Getenv("MATRIX_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
}

func classification(splits, resets bool) string {
	s := "rolls one at a time"
	if splits {
		s = "splits"
	}
	if resets {
		s += ", resets JetStream"
	}
	return s
}

type stage struct {
	routes, meta, writable bool
	streamApplies          bool
	detail                 string
}

func (s stage) ok() bool { return s.routes && s.meta && (!s.streamApplies || s.writable) }

func (s stage) String() string {
	mark := func(b bool, c string) string {
		if b {
			return c
		}
		return "-"
	}
	w := "."
	if s.streamApplies {
		w = mark(s.writable, "W")
	}
	return mark(s.routes, "R") + mark(s.meta, "M") + w
}

type matrixRow struct {
	phases        [3]stage
	streamApplies bool
	streamKept    bool
	splits        bool
	resets        bool
	// systemUserApplies: a side of the case has the controller's system
	// user; systemUser is then systemUserRuns' summary at every stage.
	systemUserApplies bool
	systemUser        [3]string
}

// noKind stands in the matrix tables for a case whose difference is no
// fact: its effect is the zero Effect (rolls one at a time, keeps
// JetStream, does not reload).
const noKind ChangeKind = "(none)"

func (r matrixRow) streamKeptString() string {
	switch {
	case !r.streamApplies:
		return "n/a"
	case r.streamKept:
		return "yes"
	default:
		return "no"
	}
}

const streamName, streamSubject = "ORDERS", "orders.new"

// runMatrixRow starts a server at every place on its old config, writes the
// stream (when the old config has JetStream), and moves the servers to their
// new config from the highest ordinal down, observing each stage.
func runMatrixRow(t *testing.T, locals []rendertest.Local, old, new []serverRun) matrixRow {
	servers := make([]*natsServer, len(locals))
	for i, l := range locals {
		servers[i] = &natsServer{local: l}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
	})
	for i, s := range servers {
		s.start(t, old[i])
	}
	oldJetStream, newJetStream := old[0].JetStream, new[0].JetStream
	row := matrixRow{streamApplies: oldJetStream,
		systemUserApplies: slices.ContainsFunc(old, serverRun.HasSystemUser) || slices.ContainsFunc(new, serverRun.HasSystemUser)}
	acked := 0
	first := observeStage(servers, false, &acked, 60*time.Second)
	if !first.ok() {
		t.Fatalf("the cluster on the old config did not form: %s (%s)", first, first.detail)
	}
	if oldJetStream {
		acked = createStream(t, servers[0])
	}
	for i, idx := range []int{2, 1, 0} {
		s := servers[idx]
		s.stop()
		s.start(t, new[idx])
		withStream := oldJetStream && i < 2
		row.phases[i] = observeStage(servers, withStream, &acked, 20*time.Second)
		if i == 2 && oldJetStream {
			row.phases[i].streamApplies = true
			row.streamKept, row.phases[i].writable = streamStillThere(servers, acked, 10*time.Second)
		}
		t.Logf("stage %d: %s %s", i, row.phases[i], row.phases[i].detail)
		if row.systemUserApplies {
			ok, summary, detail := systemUserRuns(servers, 10*time.Second)
			row.systemUser[i] = summary
			if !ok {
				t.Errorf("stage %d: the system user block does not do what it must: %s", i, detail)
			}
		}
	}
	row.splits = !row.phases[0].ok() || !row.phases[1].ok()
	row.resets = oldJetStream && newJetStream && !row.streamKept
	return row
}

// observeStage polls until every check passes or the wait runs out, and
// returns the last result.
func observeStage(servers []*natsServer, withStream bool, acked *int, wait time.Duration) stage {
	deadline := time.Now().Add(wait)
	for {
		st := stage{streamApplies: withStream}
		var details []string
		st.routes = true
		for _, s := range servers {
			to := s.routedTo()
			for _, o := range servers {
				if o != s && !to[o.name()] {
					st.routes = false
					details = append(details, s.name()+" has no route to "+o.name())
				}
			}
		}
		var d string
		st.meta, d = metaWhole(servers)
		if d != "" {
			details = append(details, d)
		}
		if withStream && st.routes && st.meta {
			st.writable, d = streamWritable(servers, acked)
			if d != "" {
				details = append(details, d)
			}
		}
		st.detail = strings.Join(details, "; ")
		if st.ok() || time.Now().After(deadline) {
			if withStream && !(st.routes && st.meta) {
				// Record whether the stream took writes even so.
				st.writable, _ = streamWritable(servers, acked)
			}
			return st
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// metaWhole: every server running JetStream names the same meta leader, and
// the leader sees every other such server as a current, online member.
func metaWhole(servers []*natsServer) (bool, string) {
	var js []*natsServer
	for _, s := range servers {
		if s.running.JetStream {
			js = append(js, s)
		}
	}
	if len(js) == 0 {
		return true, ""
	}
	leader := ""
	for _, s := range js {
		m, ok := s.meta()
		if !ok || m.Leader == "" {
			return false, s.name() + " sees no meta leader"
		}
		if leader == "" {
			leader = m.Leader
		} else if m.Leader != leader {
			return false, fmt.Sprintf("meta leaders differ: %s and %s", leader, m.Leader)
		}
	}
	for _, s := range js {
		if s.name() != leader {
			continue
		}
		m, _ := s.meta()
		for _, o := range js {
			if o.name() == leader {
				continue
			}
			i := slices.IndexFunc(m.Replicas, func(r struct {
				Name    string `json:"name"`
				Current bool   `json:"current"`
				Offline bool   `json:"offline"`
			}) bool {
				return r.Name == o.name()
			})
			if i < 0 || !m.Replicas[i].Current || m.Replicas[i].Offline {
				return false, fmt.Sprintf("meta leader %s does not see %s current", leader, o.name())
			}
		}
		return true, ""
	}
	return false, "the meta leader " + leader + " is not one of the servers"
}

func connect(s *natsServer) (*nats.Conn, nats.JetStreamContext, error) {
	nc, err := nats.Connect(s.url(), s.running.clientOptions()...)
	if err != nil {
		return nil, nil, err
	}
	js, err := nc.JetStream(nats.MaxWait(2 * time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// createStream makes the R3 stream on the old config and writes 10 messages.
func createStream(t *testing.T, s *natsServer) int {
	t.Helper()
	return createStreamWith(t, s, &nats.StreamConfig{Name: streamName, Subjects: []string{"orders.>"}, Replicas: 3, Storage: nats.FileStorage}, streamSubject)
}

// createStreamWith makes a stream through the server and writes 10
// messages on subject.
func createStreamWith(t *testing.T, s *natsServer, cfg *nats.StreamConfig, subject string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := func() error {
			nc, js, err := connect(s)
			if err != nil {
				return err
			}
			defer nc.Close()
			if _, err := js.AddStream(cfg); err != nil {
				return err
			}
			for range 10 {
				if _, err := js.Publish(subject, []byte("before")); err != nil {
					return err
				}
			}
			return nil
		}()
		if err == nil {
			return 10
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the stream %s through %s: %v", cfg.Name, s.name(), err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// streamWritable: the stream takes a write through every server (as a client
// of the config each runs), and its replicas are current.
func streamWritable(servers []*natsServer, acked *int) (bool, string) {
	return streamWritableIn(servers, acked, streamName, streamSubject, "")
}

// streamWritableIn: the stream takes a write on subject through every
// server, and its replicas are current; with cluster set, its leader and
// replicas are in that cluster (of a supercluster).
func streamWritableIn(servers []*natsServer, acked *int, stream, subject, cluster string) (bool, string) {
	var info *nats.StreamInfo
	for _, s := range servers {
		nc, js, err := connect(s)
		if err != nil {
			return false, fmt.Sprintf("connecting to %s: %v", s.name(), err)
		}
		_, err = js.Publish(subject, []byte("during"))
		if err == nil {
			*acked++
			info, err = js.StreamInfo(stream)
		}
		nc.Close()
		if err != nil {
			return false, fmt.Sprintf("writing %s through %s: %v", stream, s.name(), err)
		}
	}
	if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 || (cluster != "" && info.Cluster.Name != cluster) {
		return false, "the stream has no leader, not two replicas or is not in cluster " + orNone(cluster)
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline {
			return false, "stream replica " + r.Name + " is not current"
		}
	}
	return true, ""
}

// streamStillThere: once all servers run the new config, the stream exists
// with every acknowledged message, and takes writes with current replicas.
func streamStillThere(servers []*natsServer, acked int, wait time.Duration) (kept, writable bool) {
	deadline := time.Now().Add(wait)
	for {
		nc, js, err := connect(servers[0])
		if err == nil {
			info, err := js.StreamInfo(streamName)
			nc.Close()
			if err == nil && info.State.Msgs >= uint64(acked) {
				n := acked
				ok, _ := streamWritable(servers, &n)
				if ok || time.Now().After(deadline) {
					return true, ok
				}
			}
		}
		if time.Now().After(deadline) {
			return false, false
		}
		time.Sleep(300 * time.Millisecond)
	}
}
