package rollout

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestRouteCompatibilityMatrix establishes, with real nats-server processes,
// which changes roll one server at a time, which split a cluster, and which
// leave JetStream's state behind, and asserts that the planner's
// classification (the effects table in changes.go) is exactly that.
//
// For every kind of change, three servers start on the old config and an R3
// stream is written; then the servers move to the new config one at a time
// (2 old + 1 new, 1 old + 2 new, all new), each keeping its store directory.
// At every stage the test records whether every server routes to every other,
// whether the JetStream meta group has one leader with every member current
// (from the leader's view, the only reliable one), and whether the stream
// takes writes through every server with its replicas current; at the end,
// whether the stream and its messages are still there. A change splits when
// a mixed stage fails any of these; it resets JetStream when the stream is
// gone once all servers run the new config.
func TestRouteCompatibilityMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	bins := map[string]string{"2.15.1": natsBinary(t, "2.15.1"), "2.15.2": natsBinary(t, "2.15.2")}
	w := newTrustWorld(t, t.TempDir())

	base := variant{version: "2.15.2", clusterName: "demo", jetStream: true, maxMemory: 256 << 20, maxFile: 1 << 30}
	withAuth := func(v variant, system string, accounts ...string) variant {
		v.system, v.accounts = system, accounts
		return v
	}
	authBase := withAuth(base, w.sysA.pub, w.app.pub)
	change := func(v variant, f func(*variant)) variant { f(&v); return v }

	cases := []struct {
		name     string
		kind     ChangeKind
		old, new variant
	}{
		{"add auth", ChangeAddAuth, base, authBase},
		{"remove auth", ChangeRemoveAuth, authBase, base},
		{"another NATS operator", ChangeOperator, authBase, withAuth(base, w.sysB.pub, w.app.pub)},
		{"another system account", ChangeSystemAccount, authBase, withAuth(base, w.sysA2.pub, w.app.pub)},
		{"another cluster name", ChangeClusterName, base, change(base, func(v *variant) { v.clusterName = "other" })},
		{"add a JetStream domain", ChangeJetStreamDomainAddRemove, base, change(base, func(v *variant) { v.domain = "hub" })},
		{"remove the JetStream domain", ChangeJetStreamDomainAddRemove, change(base, func(v *variant) { v.domain = "hub" }), base},
		{"another JetStream domain", ChangeJetStreamDomain, change(base, func(v *variant) { v.domain = "east" }), change(base, func(v *variant) { v.domain = "west" })},
		{"turn JetStream on", ChangeJetStream, change(base, func(v *variant) { v.jetStream = false }), base},
		{"turn JetStream off", ChangeJetStream, base, change(base, func(v *variant) { v.jetStream = false })},
		{"patch version up", ChangeVersion, change(base, func(v *variant) { v.version = "2.15.1" }), base},
		{"patch version down", ChangeVersion, base, change(base, func(v *variant) { v.version = "2.15.1" })},
		{"other JetStream limits", ChangeJetStreamLimits, base, change(base, func(v *variant) { v.maxMemory, v.maxFile = 512<<20, 2<<30 })},
		{"other server tags", ChangeServerTags, base, change(base, func(v *variant) { v.serverTags = []string{"region:east"} })},
		{"add an account trust", ChangeAccounts, authBase, withAuth(base, w.sysA.pub, w.app.pub, w.app2.pub)},
		{"remove an account trust", ChangeAccounts, withAuth(base, w.sysA.pub, w.app.pub, w.app2.pub), authBase},
	}
	// Every change kind the planner knows is in the matrix.
	var kinds []ChangeKind
	for _, c := range cases {
		kinds = append(kinds, c.kind)
	}
	for _, k := range ChangeKinds() {
		if !slices.Contains(kinds, k) {
			t.Errorf("change kind %s is not in the matrix", k)
		}
	}

	var mu sync.Mutex
	rows := map[string]matrixRow{}
	t.Run("changes", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				got := Classify(c.old.facts(w), c.new.facts(w))
				if len(got) != 1 || got[0].Kind != c.kind {
					t.Fatalf("Classify(old, new) = %v, want only %s", got, c.kind)
				}
				row := runMatrixRow(t, bins, w, c.old, c.new)
				row.kind = c.kind
				mu.Lock()
				rows[c.name] = row
				mu.Unlock()
			})
		}
	})

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-27s | %-24s | %-13s | %-13s | %-7s | %-11s | %-24s | %s\n", "change", "kind", "2 old + 1 new", "1 old + 2 new", "all new", "stream kept", "found", "planner")
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 150))
	for _, c := range cases {
		row, ok := rows[c.name]
		if !ok {
			continue
		}
		e := EffectOf(c.kind)
		fmt.Fprintf(&b, "%-27s | %-24s | %-13s | %-13s | %-7s | %-11s | %-24s | %s\n", c.name, c.kind,
			row.phases[0], row.phases[1], row.phases[2], row.streamKeptString(), classification(row.splits, row.resets), classification(e.Splits, e.ResetsJetStream))
		if e.Splits != row.splits || e.ResetsJetStream != row.resets {
			t.Errorf("%s (%s): the planner classifies it %s, real servers %s", c.name, c.kind, classification(e.Splits, e.ResetsJetStream), classification(row.splits, row.resets))
		}
	}
	b.WriteString("(each stage: R = every server routes to every other, M = one meta leader with every member current, W = the stream takes writes through every server with its replicas current; - = failed, . = not applicable)\n")
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
	kind          ChangeKind
	phases        [3]stage
	streamApplies bool
	streamKept    bool
	splits        bool
	resets        bool
}

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

func runMatrixRow(t *testing.T, bins map[string]string, w *trustWorld, old, new variant) matrixRow {
	dir := t.TempDir()
	servers := make([]*natsServer, 3)
	var routes []string
	for i := range servers {
		s := &natsServer{name: fmt.Sprintf("s%d", i), dir: filepath.Join(dir, fmt.Sprintf("s%d", i)),
			clientPort: freePort(t), httpPort: freePort(t), routePort: freePort(t)}
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		servers[i] = s
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", s.routePort))
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
	})
	for _, s := range servers {
		s.start(t, bins[old.version], old, routes, w)
	}
	row := matrixRow{streamApplies: old.jetStream}
	acked := 0
	first := observeStage(servers, w, false, &acked, 60*time.Second)
	if !first.ok() {
		t.Fatalf("the cluster on the old config did not form: %s (%s)", first, first.detail)
	}
	if old.jetStream {
		acked = createStream(t, servers[0], w)
	}
	for i, idx := range []int{2, 1, 0} {
		s := servers[idx]
		s.stop()
		s.start(t, bins[new.version], new, routes, w)
		withStream := old.jetStream && i < 2
		wait := 20 * time.Second
		row.phases[i] = observeStage(servers, w, withStream, &acked, wait)
		if i == 2 && old.jetStream {
			row.phases[i].streamApplies = true
			row.streamKept, row.phases[i].writable = streamStillThere(servers, w, acked, 10*time.Second)
		}
		t.Logf("stage %d: %s %s", i, row.phases[i], row.phases[i].detail)
	}
	row.splits = !row.phases[0].ok() || !row.phases[1].ok()
	row.resets = old.jetStream && new.jetStream && !row.streamKept
	return row
}

// observeStage polls until every check passes or the wait runs out, and
// returns the last result.
func observeStage(servers []*natsServer, w *trustWorld, withStream bool, acked *int, wait time.Duration) stage {
	deadline := time.Now().Add(wait)
	for {
		st := stage{streamApplies: withStream}
		var details []string
		st.routes = true
		for _, s := range servers {
			to := s.routedTo()
			for _, o := range servers {
				if o != s && !to[o.name] {
					st.routes = false
					details = append(details, s.name+" has no route to "+o.name)
				}
			}
		}
		var d string
		st.meta, d = metaWhole(servers)
		if d != "" {
			details = append(details, d)
		}
		if withStream && st.routes && st.meta {
			st.writable, d = streamWritable(servers, w, acked)
			if d != "" {
				details = append(details, d)
			}
		}
		st.detail = strings.Join(details, "; ")
		if st.ok() || time.Now().After(deadline) {
			if withStream && !(st.routes && st.meta) {
				// Record whether the stream took writes even so.
				st.writable, _ = streamWritable(servers, w, acked)
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
		if s.running.jetStream {
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
			return false, s.name + " sees no meta leader"
		}
		if leader == "" {
			leader = m.Leader
		} else if m.Leader != leader {
			return false, fmt.Sprintf("meta leaders differ: %s and %s", leader, m.Leader)
		}
	}
	for _, s := range js {
		if s.name != leader {
			continue
		}
		m, _ := s.meta()
		for _, o := range js {
			if o.name == leader {
				continue
			}
			i := slices.IndexFunc(m.Replicas, func(r struct {
				Name    string `json:"name"`
				Current bool   `json:"current"`
				Offline bool   `json:"offline"`
			}) bool {
				return r.Name == o.name
			})
			if i < 0 || !m.Replicas[i].Current || m.Replicas[i].Offline {
				return false, fmt.Sprintf("meta leader %s does not see %s current", leader, o.name)
			}
		}
		return true, ""
	}
	return false, "the meta leader " + leader + " is not one of the servers"
}

func connect(s *natsServer, w *trustWorld) (*nats.Conn, nats.JetStreamContext, error) {
	nc, err := nats.Connect(s.url(), s.running.clientOptions(w)...)
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
func createStream(t *testing.T, s *natsServer, w *trustWorld) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := func() error {
			nc, js, err := connect(s, w)
			if err != nil {
				return err
			}
			defer nc.Close()
			if _, err := js.AddStream(&nats.StreamConfig{Name: streamName, Subjects: []string{"orders.>"}, Replicas: 3, Storage: nats.FileStorage}); err != nil {
				return err
			}
			for i := 0; i < 10; i++ {
				if _, err := js.Publish(streamSubject, []byte("before")); err != nil {
					return err
				}
			}
			return nil
		}()
		if err == nil {
			return 10
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the R3 stream on the old config: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// streamWritable: the stream takes a write through every server (as a client
// of the config each runs), and its replicas are current.
func streamWritable(servers []*natsServer, w *trustWorld, acked *int) (bool, string) {
	var info *nats.StreamInfo
	for _, s := range servers {
		nc, js, err := connect(s, w)
		if err != nil {
			return false, fmt.Sprintf("connecting to %s: %v", s.name, err)
		}
		_, err = js.Publish(streamSubject, []byte("during"))
		if err == nil {
			*acked++
			info, err = js.StreamInfo(streamName)
		}
		nc.Close()
		if err != nil {
			return false, fmt.Sprintf("writing through %s: %v", s.name, err)
		}
	}
	if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		return false, "the stream has no leader or not two replicas"
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
func streamStillThere(servers []*natsServer, w *trustWorld, acked int, wait time.Duration) (kept, writable bool) {
	deadline := time.Now().Add(wait)
	for {
		nc, js, err := connect(servers[0], w)
		if err == nil {
			info, err := js.StreamInfo(streamName)
			nc.Close()
			if err == nil && info.State.Msgs >= uint64(acked) {
				n := acked
				ok, _ := streamWritable(servers, w, &n)
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
