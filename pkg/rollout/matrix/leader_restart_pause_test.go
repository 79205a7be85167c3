package matrix

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

var measurePause = flag.Bool("measure-pause", false, "run TestMetaLeaderRestartWritePause (real servers, minutes)")

// pauseRuns is how many restarts each variant measures.
const pauseRuns = 5

// TestMetaLeaderRestartWritePause measures, with real nats-server processes,
// how long client writes to an R3 stream pause while the controller restarts
// the server that leads both the JetStream meta group and the stream, and
// whether stepping the leaders down first changes it. It is a measurement,
// not a check: it runs only with -measure-pause, prints a table and asserts
// only that no acknowledged message is lost.
//
// Conclusion (nats-server 2.15.2, 2 loaded cores, 2x5 runs per variant):
// lame duck mode hands the stream and meta leadership away by itself, so
// the longest write gap is one timed-out publish (median 266ms, i.e. the
// 250ms ack timeout plus the retry) with or without stepdowns first; a
// stream leader stepdown only moves that same gap earlier, a meta leader
// stepdown alone changes nothing for writes (two 2s outliers in one loaded
// run, not seen again), and no acknowledged write was lost.
//
// Each variant gets 3 fresh servers on a 3-server render with the
// controller's system user, and an R3 stream. Each of its runs makes one
// server lead both the meta group and the stream, starts a publisher on
// another server (synchronous publishes, 250ms ack timeout, retried with
// the same Nats-Msg-Id until acknowledged, 2ms apart), then, per variant,
// steps the stream leader and/or the meta leader down from the system
// account and waits for the new leader, restarts the server the way
// Kubernetes does (the preStop `nats-server --signal ldm=<pid_file>`, wait
// for exit up to the termination grace period, SIGTERM after), starts it
// again on the same config and store, waits until the meta group and the
// stream's replicas are current again, and publishes one more second. The
// run records the longest gap between two acknowledged publishes, the
// failed attempts, and in which phase the gap began.
func TestMetaLeaderRestartWritePause(t *testing.T) {
	if !*measurePause {
		t.Skip("a measurement; run with -measure-pause")
	}
	bin := natsBinary(t, rendertest.DefaultVersion)
	variants := []pauseVariant{
		{name: "no stepdown"},
		{name: "meta leader stepdown first", meta: true},
		{name: "meta + stream leader stepdown first", meta: true, stream: true},
	}
	results := make([][]pauseRun, len(variants))
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			results[i] = measureVariant(t, bin, v)
		})
	}
	t.Log("\n" + pauseTable(variants, results))
}

// pauseVariant is what the controller does before the lame duck signal.
type pauseVariant struct {
	name string
	// meta steps the meta leader down and waits for another leader; stream
	// does the same for the stream leader (before the meta leader).
	meta, stream bool
}

// pauseRun is what one restart measured.
type pauseRun struct {
	// gap is the longest time between two acknowledged publishes; gapPhase
	// is the phase the last acknowledgement before it fell in.
	gap      time.Duration
	gapPhase string
	// failures counts publish attempts that got no acknowledgement.
	failures int
	acked    int
	// exited is the time from the lame duck signal to the process exit;
	// settled from the signal to the cluster current again.
	exited, settled time.Duration
	// leadersAtExit names the meta and stream leaders just after the exit.
	leadersAtExit string
}

func measureVariant(t *testing.T, bin string, v pauseVariant) []pauseRun {
	spec := matrixSpec{
		cluster:    rendertest.NewCluster(matrixNamespace, "demo", rendertest.JetStreamLimits("256Mi", "1Gi")),
		systemUser: rendertest.SystemUser(),
	}
	out := spec.render(t)
	locals, routes := rendertest.LocalAddresses(t, out, matrixNamespace, "demo")
	servers := make([]*natsServer, len(out.Servers))
	runs := make([]serverRun, len(out.Servers))
	for i, s := range out.Servers {
		cfg, err := rendertest.LocalizeConfig(s.Config, locals[i], routes)
		if err != nil {
			t.Fatalf("localizing %s: %v", s.Name, err)
		}
		runs[i] = serverRun{Name: s.Name, Binary: bin, Config: cfg, JetStream: true, SystemPassword: rendertest.SystemUserPassword}
		servers[i] = &natsServer{local: locals[i]}
		servers[i].start(t, runs[i])
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
	})
	var none int
	if st := observeStage(servers, false, &none, 60*time.Second); !st.ok() {
		t.Fatalf("the 3 servers did not form a cluster: %s (%s)", st, st.detail)
	}
	createStream(t, servers[0])

	var got []pauseRun
	for n := range pauseRuns {
		r := restartLeader(t, bin, servers, runs, v, n)
		t.Logf("run %d: longest gap %s (began %s), %d failed attempts, %d acknowledged, exit %s after the signal, settled after %s, leaders at exit: %s",
			n, r.gap.Round(time.Millisecond), r.gapPhase, r.failures, r.acked, r.exited.Round(10*time.Millisecond), r.settled.Round(10*time.Millisecond), r.leadersAtExit)
		got = append(got, r)
	}
	return got
}

// restartLeader makes one server lead the meta group and the stream,
// publishes through another, and restarts the leader as the variant says.
func restartLeader(t *testing.T, bin string, servers []*natsServer, runs []serverRun, v pauseVariant, n int) pauseRun {
	t.Helper()
	if !pollUntil(60*time.Second, func() bool { return clusterCurrent(servers) == "" }) {
		t.Fatalf("run %d: the cluster is not current: %s", n, clusterCurrent(servers))
	}
	// The target leads the meta group; make it lead the stream too.
	target := slices.IndexFunc(servers, func(s *natsServer) bool { return s.name() == metaLeader(servers) })
	if target < 0 {
		t.Fatalf("run %d: no meta leader", n)
	}
	other := servers[(target+1)%len(servers)]
	if !pollUntil(30*time.Second, func() bool {
		if p, err := placement(other); err == nil && p.leader == servers[target].name() {
			return true
		}
		_ = streamStepDown(other, servers[target].name())
		time.Sleep(time.Second)
		return false
	}) {
		t.Fatalf("run %d: %s did not become the stream leader", n, servers[target].name())
	}
	if l := metaLeader(servers); l != servers[target].name() {
		t.Fatalf("run %d: the meta leader moved to %q while placing the stream leader", n, l)
	}

	subject := fmt.Sprintf("orders.run%d", n)
	p := startPublisher(t, other, subject)
	time.Sleep(time.Second)

	if v.stream {
		p.phase("stream stepdown")
		if err := streamStepDown(other, ""); err != nil {
			t.Fatalf("run %d: stepping the stream leader down: %v", n, err)
		}
		if !pollUntil(20*time.Second, func() bool {
			pl, err := placement(other)
			return err == nil && pl.leader != "" && pl.leader != servers[target].name()
		}) {
			t.Fatalf("run %d: the stream leader did not move off %s", n, servers[target].name())
		}
	}
	if v.meta {
		p.phase("meta stepdown")
		if err := rawJS(other, "$JS.API.META.LEADER.STEPDOWN", ""); err != nil {
			t.Fatalf("run %d: stepping the meta leader down: %v", n, err)
		}
		if !pollUntil(20*time.Second, func() bool {
			l := metaLeader(servers)
			return l != "" && l != servers[target].name()
		}) {
			t.Fatalf("run %d: the meta leader did not move off %s", n, servers[target].name())
		}
	}

	var r pauseRun
	p.phase("lame duck")
	signalled := time.Now()
	servers[target].lameDuckStop(t, bin)
	r.exited = time.Since(signalled)
	rest := slices.Delete(slices.Clone(servers), target, target+1)
	pl, _ := placement(other)
	r.leadersAtExit = fmt.Sprintf("meta %s, stream %s", metaLeader(rest), pl.leader)

	p.phase("restart")
	servers[target].start(t, runs[target])
	if !pollUntil(60*time.Second, func() bool { return clusterCurrent(servers) == "" }) {
		t.Errorf("run %d: the cluster did not settle after the restart: %s", n, clusterCurrent(servers))
	}
	r.settled = time.Since(signalled)
	p.phase("settled")
	time.Sleep(time.Second)
	acked := p.stop()

	r.gap, r.gapPhase, r.failures, r.acked = p.gap, p.gapPhase, p.failures, len(acked)
	if missing := missingAcked(t, other, subject, acked); len(missing) > 0 {
		t.Errorf("run %d: %d acknowledged messages are not in the stream, first %s", n, len(missing), missing[0])
	}
	return r
}

// lameDuckStop stops the server as Kubernetes does with the rendered
// preStop hook: `nats-server --signal ldm=<pid_file>`, then wait for the
// process to exit up to the termination grace period, SIGTERM after it.
func (s *natsServer) lameDuckStop(t *testing.T, bin string) {
	t.Helper()
	var c struct {
		PidFile string `json:"pid_file"`
	}
	if err := json.Unmarshal(s.running.Config, &c); err != nil || c.PidFile == "" {
		t.Fatalf("%s's config has no pid_file: %v", s.name(), err)
	}
	if out, err := exec.Command(bin, "--signal", "ldm="+c.PidFile).CombinedOutput(); err != nil {
		t.Fatalf("signalling lame duck mode to %s: %v\n%s", s.name(), err, out)
	}
	// The pod's termination grace period: measureVariant's cluster sets no
	// spec.lameDuck.
	grace := time.Duration(render.TerminationGracePeriodOf(&clusterv1beta1.NatsClusterSpec{})) * time.Second
	select {
	case <-s.done:
		s.cmd = nil
	case <-time.After(grace):
		t.Logf("%s did not exit within the termination grace period", s.name())
		s.stop()
	}
}

// clusterCurrent is "" when the meta group is whole and the stream has a
// leader and two current replicas, as the servers report; else why not.
func clusterCurrent(servers []*natsServer) string {
	if ok, d := metaWhole(servers); !ok {
		return d
	}
	nc, js, err := connect(servers[0])
	if err != nil {
		return err.Error()
	}
	defer nc.Close()
	info, err := js.StreamInfo(streamName)
	if err != nil {
		return err.Error()
	}
	if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		return "the stream has no leader or not two replicas"
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline {
			return "stream replica " + r.Name + " is not current"
		}
	}
	return ""
}

// streamStepDown asks the stream leader to step down
// ($JS.API.STREAM.LEADER.STEPDOWN.<stream>, from the stream's account),
// preferring a server when preferred is not empty.
func streamStepDown(s *natsServer, preferred string) error {
	nc, err := nats.Connect(s.url(), s.running.clientOptions()...)
	if err != nil {
		return err
	}
	defer nc.Close()
	var body []byte
	if preferred != "" {
		body, _ = json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	}
	m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+streamName, body, 5*time.Second)
	if err != nil {
		return err
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return err
	}
	if r.Error != nil {
		return errors.New(r.Error.Description)
	}
	return nil
}

// publisher publishes to the stream synchronously until stopped, and
// measures the longest gap between two acknowledgements.
type publisher struct {
	nc   *nats.Conn
	done chan struct{}
	quit chan struct{}

	mu       sync.Mutex
	current  string
	gap      time.Duration
	gapPhase string
	failures int
	acked    []string
}

func startPublisher(t *testing.T, s *natsServer, subject string) *publisher {
	t.Helper()
	nc, js, err := connect(s)
	if err != nil {
		t.Fatalf("connecting the publisher to %s: %v", s.name(), err)
	}
	p := &publisher{nc: nc, done: make(chan struct{}), quit: make(chan struct{}), current: "steady"}
	go func() {
		defer close(p.done)
		last, lastPhase := time.Now(), "steady"
		for i := 0; ; i++ {
			id := fmt.Sprintf("%s-%d", subject, i)
			for {
				select {
				case <-p.quit:
					return
				default:
				}
				_, err := js.Publish(subject, []byte(id), nats.MsgId(id), nats.AckWait(250*time.Millisecond))
				now := time.Now()
				p.mu.Lock()
				if err != nil {
					p.failures++
					p.mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if d := now.Sub(last); d > p.gap {
					p.gap, p.gapPhase = d, lastPhase
				}
				last, lastPhase = now, p.current
				p.acked = append(p.acked, id)
				p.mu.Unlock()
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return p
}

// phase names what happens from now on, for the gap that begins in it.
func (p *publisher) phase(name string) {
	p.mu.Lock()
	p.current = name
	p.mu.Unlock()
}

// stop ends publishing and returns the acknowledged message IDs.
func (p *publisher) stop() []string {
	close(p.quit)
	<-p.done
	p.nc.Close()
	return p.acked
}

// missingAcked reads the subject's messages back and returns the
// acknowledged IDs that are not among them.
func missingAcked(t *testing.T, s *natsServer, subject string, acked []string) []string {
	t.Helper()
	nc, js, err := connect(s)
	if err != nil {
		t.Fatalf("connecting to read back: %v", err)
	}
	defer nc.Close()
	sub, err := js.SubscribeSync(subject, nats.OrderedConsumer(), nats.DeliverAll())
	if err != nil {
		t.Fatalf("reading back %s: %v", subject, err)
	}
	defer sub.Unsubscribe()
	stored := map[string]bool{}
	for {
		m, err := sub.NextMsg(2 * time.Second)
		if err != nil {
			break
		}
		stored[string(m.Data)] = true
		if md, err := m.Metadata(); err == nil && md.NumPending == 0 && len(stored) >= len(acked) {
			break
		}
	}
	var missing []string
	for _, id := range acked {
		if !stored[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// pauseTable renders the median and max of each variant's longest gap and
// failed attempts.
func pauseTable(variants []pauseVariant, results [][]pauseRun) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "variant\truns\tgap median\tgap max\tfailures median\tfailures max\texit median\tsettled median\tphases of the longest gaps")
	for i, v := range variants {
		rs := results[i]
		if len(rs) == 0 {
			fmt.Fprintf(w, "%s\t0\t\t\t\t\t\t\t\n", v.name)
			continue
		}
		gaps := make([]time.Duration, len(rs))
		fails := make([]int, len(rs))
		exits := make([]time.Duration, len(rs))
		settles := make([]time.Duration, len(rs))
		var phases []string
		for j, r := range rs {
			gaps[j], fails[j], exits[j], settles[j] = r.gap, r.failures, r.exited, r.settled
			phases = append(phases, r.gapPhase)
		}
		slices.Sort(gaps)
		slices.Sort(fails)
		slices.Sort(exits)
		slices.Sort(settles)
		m := len(rs) / 2
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", v.name, len(rs),
			gaps[m].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), fails[m], fails[len(fails)-1],
			exits[m].Round(10*time.Millisecond), settles[m].Round(10*time.Millisecond), strings.Join(phases, ","))
	}
	w.Flush()
	return b.String()
}
