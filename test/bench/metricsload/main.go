package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

type options struct {
	fromVersion, toVersion string
	rate                   int
	duration               time.Duration
	newTokenAt             time.Duration
	newTokenEvery          time.Duration
	newTokens              int
	timeout                time.Duration
}

const (
	clusterName   = "demo"
	ns            = "bench-metrics"
	leaseNS       = "nats-system"
	leaseName     = "nats-operator"
	scraperSA     = "bench-scraper"
	scraperBind   = "bench-scraper-metrics-reader"
	gateToStep    = "nats_operator_gate_to_step_seconds"
	stepDuration  = "nats_operator_step_duration_seconds"
	restartOne    = "RestartOne"
	maxOutstandng = 1024
)

func main() {
	var o options
	flag.StringVar(&o.fromVersion, "from-version", "2.15.2", "nats-server version the cluster is created on.")
	flag.StringVar(&o.toVersion, "to-version", "2.15.1", "Version the measured rollouts change to.")
	flag.IntVar(&o.rate, "rate", 300, "Requests a second of the flood.")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "How long the flood lasts.")
	flag.DurationVar(&o.newTokenAt, "new-token-at", 15*time.Second, "When, into the flood, the first of the legitimate scraper's new tokens tries /metrics.")
	flag.DurationVar(&o.newTokenEvery, "new-token-every", 5*time.Second, "Time between the new tokens' first tries.")
	flag.IntVar(&o.newTokens, "new-tokens", 8, "New legitimate tokens tried during the flood (0: none).")
	flag.DurationVar(&o.timeout, "rollout-timeout", 10*time.Minute, "How long one rollout may take.")
	flag.Parse()
	klog.SetOutput(os.Stderr)
	if o.rate <= 0 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "bench-metrics: --rate and --duration must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &harness{}
	if err := h.guard(func() error { return run(ctx, h, o) }); err != nil {
		fmt.Fprintln(os.Stderr, "bench-metrics:", err)
		os.Exit(1)
	}
}

// say prints progress to stderr; figures go to stdout (see figure).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// figure prints one figure: "name: value unit"; a float or a duration is
// rounded to the millisecond, NaN printed as "none".
func figure(name string, value any, unit string) {
	switch v := value.(type) {
	case float64:
		if math.IsNaN(v) {
			fmt.Printf("%s: none %s\n", name, unit)
			return
		}
		fmt.Printf("%s: %s %s\n", name, strconv.FormatFloat(round(v), 'f', -1, 64), unit)
	case time.Duration:
		figure(name, v.Seconds(), unit)
	default:
		fmt.Printf("%s: %v %s\n", name, v, unit)
	}
}

func round(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 3, 64), 64)
	return f
}

// bench is one run: the stack, the options, the Lease sampler.
type bench struct {
	o     options
	h     *harness
	s     *framework.Stack
	lease *leaseSampler
}

func run(ctx context.Context, h *harness, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	head, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("# nats-operator /metrics load benchmark (hack/bench-metrics.sh), commit %s, %s\n",
		strings.TrimSpace(string(head)), time.Now().UTC().Format(time.RFC3339))
	dirty, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--", "cmd", "pkg", "internal").Output()
	if d := strings.Fields(strings.ReplaceAll(string(dirty), "\n", " ")); len(d) > 0 {
		var paths []string
		for i := 1; i < len(d); i += 2 {
			paths = append(paths, d[i])
		}
		fmt.Printf("# the controller is built from the working tree, which had uncommitted changes (others' work) in %s\n", strings.Join(paths, " "))
	}
	fmt.Printf("# go %s; %s cores; load average at start %s; figures taken on a machine shared with other work\n", runtime.Version(), nproc(), loadavg())
	fmt.Printf("# 3 servers, %s -> %s, production lame duck timings; flood %d requests/s for %s, each with a new random bearer token\n",
		o.fromVersion, o.toVersion, o.rate, o.duration)

	say("starting the stack (control plane, local node, controller with leader election and HTTPS /metrics)")
	h.Cleanup(framework.RemoveBinaries)
	s := framework.StartStack(ctx, h)
	b := &bench{o: o, h: h, s: s}
	say("controller log %s, metrics %s", s.Controller.LogPath, s.Controller.MetricsURL)

	// The controller leads and answers /metrics.
	poll.Eventually(h, time.Minute, 200*time.Millisecond, "the controller to hold the Lease", func() error {
		l, err := s.Kube.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return errors.New("no holder")
		}
		return nil
	})
	poll.Eventually(h, time.Minute, 200*time.Millisecond, "/metrics to answer 200", func() error {
		code, _, err := framework.GetWithToken(s.Controller.MetricsURL, s.Controller.MetricsToken)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})

	say("creating a 3-server cluster on %s in namespace %s", o.fromVersion, ns)
	s.CreateNamespace(ctx, h, ns)
	start := time.Now()
	s.ApplyExample(ctx, h, ns, "natscluster-jetstream.yaml", func(u *unstructured.Unstructured) {
		if u.GetKind() != "NatsCluster" {
			return
		}
		_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
		_ = unstructured.SetNestedField(u.Object, o.fromVersion, "spec", "version")
		framework.ProductionLameDuck(u)
	})
	s.WaitSettledUpToDate(ctx, h, ns, clusterName, 5*time.Minute)
	if err := createStream(ctx, s.PodURLs(ctx, h, ns, clusterName)); err != nil {
		return err
	}
	s.WaitSettledUpToDate(ctx, h, ns, clusterName, 2*time.Minute)
	say("3 servers up, stream BENCH created, settled and up to date in %s", time.Since(start).Round(time.Second))
	if err := b.scraperAccount(ctx); err != nil {
		return err
	}

	b.lease = startLeaseSampler(ctx, s)
	defer b.lease.stop()
	runStart := time.Now()
	time.Sleep(3 * time.Second) // a renewal or two before the first rollout

	base, err := b.rollout(ctx, "baseline", o.fromVersion, o.toVersion, nil)
	if err != nil {
		return err
	}
	back, err := b.rollout(ctx, "back", o.toVersion, o.fromVersion, nil)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)

	fl, err := b.rollout(ctx, "flood_rollout", o.fromVersion, o.toVersion, func() *flood {
		return startFlood(ctx, s.Controller.MetricsURL, o.rate, o.duration)
	})
	if err != nil {
		return err
	}
	f := fl.flood
	for i := range o.newTokens {
		at := o.newTokenAt + time.Duration(i)*o.newTokenEvery
		if at >= o.duration-5*time.Second {
			break
		}
		if wait := time.Until(f.start.Add(at)); wait > 0 {
			time.Sleep(wait)
		}
		b.newTokenDuringFlood(ctx, f)
	}
	say("waiting for the flood to end")
	<-f.done
	time.Sleep(3 * time.Second) // a renewal after the flood
	runEnd := time.Now()
	b.lease.stop()

	f.print()
	for _, r := range []*rolloutResult{base, back, fl} {
		r.print()
	}
	b.printLease(runStart, runEnd, f)
	fmt.Println("# summary")
	figure("summary_gate_to_step_median_seconds_baseline", median(append(base.gates(), back.gates()...)), "s")
	figure("summary_gate_to_step_median_seconds_flood", median(fl.gates()), "s")
	figure("summary_wall_seconds_baseline", base.wall, "s")
	figure("summary_wall_seconds_flood", fl.wall, "s")
	fmt.Printf("# load average at the end %s\n", loadavg())
	say("done")
	return nil
}

func nproc() string {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return strconv.Itoa(runtime.NumCPU())
	}
	return strings.TrimSpace(string(out))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// createStream creates the R3 file stream BENCH, so that the gate's
// Settled waits for a stream group as well as the meta group.
func createStream(ctx context.Context, urls []string) error {
	var (
		nc  *nats.Conn
		err error
	)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		nc, err = nats.Connect(strings.Join(urls, ","), nats.Name("bench-setup"))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("connecting to %v: %w", urls, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = poll.Until(time.Minute, 200*time.Millisecond, func() error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: "BENCH", Subjects: []string{"BENCH.>"}, Replicas: 3, Storage: jetstream.FileStorage,
		})
		return err
	})
	return err
}

// scraperAccount creates the ServiceAccount the benchmark reads /metrics
// as, bound to the shipped ClusterRole nats-operator-metrics-reader, as a
// Prometheus would be.
func (b *bench) scraperAccount(ctx context.Context) error {
	if _, err := b.s.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: scraperSA},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := b.s.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: scraperBind},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nats-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraperSA, Namespace: ns}},
	}, metav1.CreateOptions{})
	return err
}

// scraperToken returns a new token of the scraper's ServiceAccount: one
// the controller has not reviewed yet.
func (b *bench) scraperToken(ctx context.Context) (string, error) {
	tr, err := b.s.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, scraperSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// tokenProbe is one new legitimate token's tries at /metrics during the
// flood.
type tokenProbe struct {
	at    time.Duration // into the flood
	tries int
	codes map[int]int
	took  time.Duration
	ok    bool
}

// newTokenDuringFlood tries /metrics with a new token of the scraper
// every 200 ms until it answers 200 (at most 30 s).
func (b *bench) newTokenDuringFlood(ctx context.Context, f *flood) {
	token, err := b.scraperToken(ctx)
	if err != nil {
		say("new token: %v", err)
		return
	}
	start := time.Now()
	tp := tokenProbe{at: start.Sub(f.start), codes: map[int]int{}}
	for time.Since(start) < 30*time.Second {
		tp.tries++
		code, _, err := framework.GetWithToken(b.s.Controller.MetricsURL, token)
		if err != nil {
			code = -1
		}
		tp.codes[code]++
		if code == http.StatusOK {
			tp.ok = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	tp.took = time.Since(start)
	say("a new legitimate token %s into the flood: %d tries, %s, answered 200: %v", tp.at.Round(time.Second), tp.tries, tp.took.Round(time.Millisecond), tp.ok)
	f.mu.Lock()
	f.probes = append(f.probes, tp)
	f.mu.Unlock()
}

func (f *flood) printProbes() {
	if len(f.probes) == 0 {
		return
	}
	fmt.Println("# new tokens of a ServiceAccount bound to nats-operator-metrics-reader during the flood, each tried every 200 ms until 200 (its user's SubjectAccessReview is cached: one TokenReview each):")
	var tries, secs []float64
	ok := 0
	for _, tp := range f.probes {
		fmt.Printf("#   %s into the flood: %d tries %s, %.3fs\n", tp.at.Round(time.Second), tp.tries, describeCodes(tp.codes), tp.took.Seconds())
		tries = append(tries, float64(tp.tries))
		secs = append(secs, tp.took.Seconds())
		if tp.ok {
			ok++
		}
	}
	figure("new_token_during_flood_probes", len(f.probes), "tokens")
	figure("new_token_during_flood_answered_200", ok, "tokens")
	figure("new_token_during_flood_tries_median", median(tries), "tries")
	figure("new_token_during_flood_tries_max", maxOf(tries), "tries")
	figure("new_token_during_flood_seconds_until_200_median", median(secs), "s")
	figure("new_token_during_flood_seconds_until_200_max", maxOf(secs), "s")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func describeCodes(codes map[int]int) string {
	var keys []int
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := strconv.Itoa(k)
		if k == -1 {
			name = "error"
		}
		parts = append(parts, fmt.Sprintf("%s x%d", name, codes[k]))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ---- one rollout ----

// rolloutResult is what one rollout measured.
type rolloutResult struct {
	name             string
	from, to         string
	wall, settled    time.Duration
	deletions        []podDeletion
	obs              []observation // gate-to-step
	durs             []observation // step duration
	readsOK, readsNo int
	readCodes        map[int]int
	flood            *flood
	patchAt          time.Time
}

// observation is one histogram observation (or the mean of several
// between two reads), when it was first read, and its step.
type observation struct {
	value  float64
	n      int // observations the value is the mean of
	at     time.Time
	prevAt time.Time
	step   int // 1-based; 0: not matched
}

type podDeletion struct {
	pod string
	at  time.Time
}

func (r *rolloutResult) gates() []float64 {
	var v []float64
	for _, o := range r.obs {
		for range o.n {
			v = append(v, o.value)
		}
	}
	return v
}

// rollout changes spec.version from -> to, starting startFlood (when not
// nil) right before, and waits until the cluster is Ready, Settled and
// UpToDate on to.
func (b *bench) rollout(ctx context.Context, name, from, to string, startFlood func() *flood) (*rolloutResult, error) {
	r := &rolloutResult{name: name, from: from, to: to, readCodes: map[int]int{}}
	token, err := b.scraperToken(ctx)
	if err != nil {
		return nil, err
	}
	url := b.s.Controller.MetricsURL
	// A first read reviews the new token: cached for a minute from here.
	var before string
	if _, err := poll.Until(time.Minute, 200*time.Millisecond, func() error {
		code, body, err := framework.GetWithToken(url, token)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		before = body
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: reading /metrics: %w", name, err)
	}
	dw, err := startDeletionWatch(ctx, b.s)
	if err != nil {
		return nil, err
	}
	defer dw.stop()

	type read struct {
		at        time.Time
		gate, dur histogram
	}
	all := parseMetrics(before, "nats_operator_")
	reads := []read{{at: time.Now(), gate: readHistogram(all, gateToStep, restartOne), dur: readHistogram(all, stepDuration, restartOne)}}
	var mu sync.Mutex
	sctx, scancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			code, body, err := framework.GetWithToken(url, token)
			if err != nil {
				code = -1
			}
			mu.Lock()
			r.readCodes[code]++
			if code != http.StatusOK {
				r.readsNo++
				mu.Unlock()
				continue
			}
			r.readsOK++
			all := parseMetrics(body, "nats_operator_")
			reads = append(reads, read{at: time.Now(), gate: readHistogram(all, gateToStep, restartOne), dur: readHistogram(all, stepDuration, restartOne)})
			mu.Unlock()
		}
	})

	fmt.Fprintln(os.Stderr)
	if startFlood != nil {
		r.flood = startFlood()
		say("%s: flood started", name)
	}
	say("%s: rolling %s -> %s", name, from, to)
	patchAt := time.Now()
	if _, err := b.s.Nats.ClusterV1beta1().NatsClusters(ns).Patch(ctx, clusterName, types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"version":%q}}`, to), metav1.PatchOptions{}); err != nil {
		scancel()
		wg.Wait()
		return nil, fmt.Errorf("patching spec.version: %w", err)
	}
	var upToDateAt, doneAt time.Time
	var last string
	_, err = poll.Until(b.o.timeout, 200*time.Millisecond, func() error {
		nc, err := b.s.Cluster(ctx, ns, clusterName)
		if err != nil {
			return err
		}
		if nc.Status.Version != to {
			last = fmt.Sprintf("status.version %q", nc.Status.Version)
			return errors.New(last)
		}
		if upToDateAt.IsZero() && framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonUpToDate) == nil {
			upToDateAt = time.Now()
		}
		if err := framework.CheckSettledUpToDate(nc); err != nil {
			last = err.Error()
			return err
		}
		doneAt = time.Now()
		return nil
	})
	if err != nil {
		scancel()
		wg.Wait()
		return nil, fmt.Errorf("%s: the rollout to %s: %w (last: %s)", name, to, err, last)
	}
	if upToDateAt.IsZero() {
		upToDateAt = doneAt
	}
	r.wall, r.settled = upToDateAt.Sub(patchAt), doneAt.Sub(patchAt)
	say("%s: up to date on %s after %s, Ready and Settled after %s", name, to, r.wall.Round(time.Millisecond), r.settled.Round(time.Millisecond))
	time.Sleep(time.Second) // a last read after the status said done
	scancel()
	wg.Wait()
	for _, d := range dw.deletions() {
		if d.at.After(patchAt) {
			r.deletions = append(r.deletions, d)
		}
	}
	r.patchAt = patchAt

	// One observation per _count increment; several between two reads
	// are their mean.
	for i := 1; i < len(reads); i++ {
		prev, cur := reads[i-1], reads[i]
		for _, x := range []struct {
			p, c histogram
			out  *[]observation
		}{{prev.gate, cur.gate, &r.obs}, {prev.dur, cur.dur, &r.durs}} {
			dc := x.c.count - x.p.count
			if dc <= 0 {
				continue
			}
			*x.out = append(*x.out, observation{value: (x.c.sum - x.p.sum) / dc, n: int(dc), at: cur.at, prevAt: prev.at})
		}
	}
	// Match each observation to the step whose deletion the informer saw
	// between the two reads (the histogram is observed when the step's
	// writes, the pod deletion last, are done).
	slack := 250 * time.Millisecond
	for _, list := range [][]observation{r.obs, r.durs} {
		for i := range list {
			o := &list[i]
			for k, d := range r.deletions {
				if d.at.After(o.prevAt.Add(-slack)) && !d.at.After(o.at.Add(slack)) {
					o.step = k + 1
				}
			}
		}
	}
	return r, nil
}

func (r *rolloutResult) print() {
	p := r.name
	what := "no flood"
	if r.flood != nil {
		what = "during the flood, the version patched right after it started"
	}
	fmt.Printf("# --- %s: %s -> %s, %s\n", p, r.from, r.to, what)
	figure(p+"_wall_seconds", r.wall, "s")
	figure(p+"_settled_seconds", r.settled, "s")
	figure(p+"_steps", len(r.deletions), "steps")
	for k, d := range r.deletions {
		gate := "not observed (no wait at the gate before it, or not read)"
		for _, o := range r.obs {
			if o.step == k+1 {
				gate = fmt.Sprintf("%.3fs", o.value)
				if o.n > 1 {
					gate += fmt.Sprintf(" (mean of %d observations between two reads)", o.n)
				}
			}
		}
		fmt.Printf("# %s step %d: %s deleted %.3fs after the change; gate to step %s\n", p, k+1, d.pod, d.at.Sub(r.patchAt).Seconds(), gate)
		figure(fmt.Sprintf("%s_step%d_deleted_after_change_seconds", p, k+1), d.at.Sub(r.patchAt), "s")
		for _, o := range r.obs {
			if o.step == k+1 {
				figure(fmt.Sprintf("%s_step%d_gate_to_step_seconds", p, k+1), o.value, "s")
			}
		}
	}
	for _, o := range r.obs {
		if o.step == 0 {
			fmt.Printf("# %s: a gate-to-step observation of %.3fs (x%d) read %.3fs after the change matches no pod deletion seen\n",
				p, o.value, o.n, o.at.Sub(r.patchAt).Seconds())
		}
	}
	g := r.gates()
	figure(p+"_gate_to_step_observed", len(g), "steps")
	figure(p+"_gate_to_step_min_seconds", minOf(g), "s")
	figure(p+"_gate_to_step_median_seconds", median(g), "s")
	figure(p+"_gate_to_step_max_seconds", maxOf(g), "s")
	var d []float64
	for _, o := range r.durs {
		for range o.n {
			d = append(d, o.value)
		}
	}
	figure(p+"_step_duration_min_seconds", minOf(d), "s")
	figure(p+"_step_duration_median_seconds", median(d), "s")
	figure(p+"_step_duration_max_seconds", maxOf(d), "s")
	fmt.Printf("# %s: /metrics read every 500 ms with a scraper token reviewed before the patch: %s\n", p, describeCodes(r.readCodes))
	figure(p+"_metrics_reads_failed", r.readsNo, "reads")
}

func minOf(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	m := v[0]
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	m := v[0]
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// median is the middle value, the mean of the two middle ones for an even
// count; NaN when empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ---- pod deletions ----

// deletionWatch records when a pod informer first saw each pod of the
// cluster being deleted.
type deletionWatch struct {
	mu     sync.Mutex
	seen   map[types.UID]bool
	dels   []podDeletion
	cancel context.CancelFunc
	f      informers.SharedInformerFactory
	once   sync.Once
}

func startDeletionWatch(ctx context.Context, s *framework.Stack) (*deletionWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	dw := &deletionWatch{seen: map[types.UID]bool{}, cancel: cancel}
	dw.f = informers.NewSharedInformerFactoryWithOptions(s.Kube, 0,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = "cluster.nats-operator.io/cluster=" + clusterName
		}))
	record := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp == nil {
			return
		}
		dw.mu.Lock()
		defer dw.mu.Unlock()
		if !dw.seen[pod.UID] {
			dw.seen[pod.UID] = true
			dw.dels = append(dw.dels, podDeletion{pod: pod.Name, at: time.Now()})
		}
	}
	reg, err := dw.f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
		DeleteFunc: record,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	dw.f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		dw.stop()
		return nil, errors.New("listing the cluster's pods")
	}
	return dw, nil
}

func (dw *deletionWatch) stop() {
	dw.once.Do(func() {
		dw.cancel()
		dw.f.Shutdown()
	})
}

func (dw *deletionWatch) deletions() []podDeletion {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return append([]podDeletion(nil), dw.dels...)
}

// ---- the Lease ----

type leaseSample struct {
	at          time.Time
	holder      string
	transitions int32
	renew       time.Time
}

// leaseSampler reads the controller's Lease every 250 ms.
type leaseSampler struct {
	mu      sync.Mutex
	samples []leaseSample
	errs    int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

func startLeaseSampler(ctx context.Context, s *framework.Stack) *leaseSampler {
	ctx, cancel := context.WithCancel(ctx)
	ls := &leaseSampler{cancel: cancel}
	ls.wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			l, err := s.Kube.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
			ls.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					ls.errs++
				}
			} else {
				smp := leaseSample{at: time.Now()}
				if l.Spec.HolderIdentity != nil {
					smp.holder = *l.Spec.HolderIdentity
				}
				if l.Spec.LeaseTransitions != nil {
					smp.transitions = *l.Spec.LeaseTransitions
				}
				if l.Spec.RenewTime != nil {
					smp.renew = l.Spec.RenewTime.Time
				}
				ls.samples = append(ls.samples, smp)
			}
			ls.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return ls
}

func (ls *leaseSampler) stop() {
	ls.once.Do(func() {
		ls.cancel()
		ls.wg.Wait()
	})
}

// window returns the samples taken from from to to.
func (ls *leaseSampler) window(from, to time.Time) []leaseSample {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []leaseSample
	for _, s := range ls.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// maxRenewInterval is the longest time between two consecutive renewTime
// values in samples (the last one to the window's end counts too).
func maxRenewInterval(samples []leaseSample, end time.Time) time.Duration {
	var renews []time.Time
	for _, s := range samples {
		if len(renews) == 0 || !s.renew.Equal(renews[len(renews)-1]) {
			renews = append(renews, s.renew)
		}
	}
	var longest time.Duration
	for i := 1; i < len(renews); i++ {
		longest = max(longest, renews[i].Sub(renews[i-1]))
	}
	if len(renews) > 0 {
		longest = max(longest, end.Sub(renews[len(renews)-1]))
	}
	return longest
}

func (b *bench) printLease(runStart, runEnd time.Time, f *flood) {
	fmt.Printf("# --- leader election: Lease %s/%s, read every 250 ms\n", leaseNS, leaseName)
	all := b.lease.window(runStart, runEnd)
	if len(all) == 0 {
		fmt.Println("# no Lease samples")
		return
	}
	first, last := all[0], all[len(all)-1]
	holders := map[string]bool{}
	for _, s := range all {
		holders[s.holder] = true
	}
	var hs []string
	for h := range holders {
		hs = append(hs, fmt.Sprintf("%q", h))
	}
	sort.Strings(hs)
	fmt.Printf("# holderIdentity at the start %q, at the end %q; holders seen: %s\n", first.holder, last.holder, strings.Join(hs, ", "))
	fmt.Printf("# spec.leaseTransitions at the start %d, at the end %d\n", first.transitions, last.transitions)
	figure("lease_transitions_whole_run", last.transitions-first.transitions, "transitions")
	figure("lease_holders_seen", len(holders), "holders")
	figure("lease_holder_unchanged", boolInt(first.holder == last.holder), "bool")
	floodEnd := f.end.Add(3 * time.Second)
	fw := b.lease.window(f.start, floodEnd)
	if len(fw) > 0 {
		figure("lease_transitions_during_flood", fw[len(fw)-1].transitions-fw[0].transitions, "transitions")
	}
	base := b.lease.window(runStart, f.start)
	figure("lease_max_renew_interval_seconds_before_flood", maxRenewInterval(base, f.start), "s")
	figure("lease_max_renew_interval_seconds_during_flood", maxRenewInterval(fw, floodEnd), "s")
	figure("lease_read_errors", b.lease.errs, "reads")
	started, stopped := countLogLines(b.s.Controller.LogPath, "Started leading"), countLogLines(b.s.Controller.LogPath, "Stopped leading")
	figure("controller_log_started_leading", started, "lines")
	figure("controller_log_stopped_leading", stopped, "lines")
	code, _, err := framework.Get(b.s.Controller.HealthURL + "/healthz")
	if err != nil {
		code = -1
	}
	figure("controller_healthz_at_end", code, "status")
}

func countLogLines(path, what string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), what) {
			n++
		}
	}
	return n
}

// ---- the flood ----

// flood sends GETs to /metrics on a fixed schedule, each with a new random
// bearer token.
type flood struct {
	rate     int
	duration time.Duration

	start, sentEnd, end time.Time
	done                chan struct{}

	mu      sync.Mutex
	sent    int
	notSent int
	codes   map[int]int
	errs    map[string]int
	lat     map[int][]time.Duration
	probes  []tokenProbe
}

func startFlood(ctx context.Context, url string, rate int, duration time.Duration) *flood {
	f := &flood{rate: rate, duration: duration, done: make(chan struct{}),
		codes: map[int]int{}, errs: map[string]int{}, lat: map[int][]time.Duration{}}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the controller's self-signed metrics certificate
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}}
	n := int(float64(rate) * duration.Seconds())
	interval := time.Duration(float64(time.Second) / float64(rate))
	f.start = time.Now()
	go func() {
		defer close(f.done)
		defer client.CloseIdleConnections()
		sem := make(chan struct{}, maxOutstandng)
		var wg sync.WaitGroup
		for i := range n {
			if ctx.Err() != nil {
				break
			}
			if d := time.Until(f.start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			select {
			case sem <- struct{}{}:
			default:
				f.mu.Lock()
				f.notSent++
				f.mu.Unlock()
				continue
			}
			f.mu.Lock()
			f.sent++
			f.mu.Unlock()
			wg.Go(func() {
				defer func() { <-sem }()
				code, took, err := oneRequest(ctx, client, url)
				f.mu.Lock()
				defer f.mu.Unlock()
				if err != nil {
					f.errs[shortErr(err)]++
					return
				}
				f.codes[code]++
				f.lat[code] = append(f.lat[code], took)
			})
		}
		f.mu.Lock()
		f.sentEnd = time.Now()
		f.mu.Unlock()
		wg.Wait()
		f.end = time.Now()
	}()
	return f
}

func oneRequest(ctx context.Context, client *http.Client, url string) (int, time.Duration, error) {
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+hex.EncodeToString(tok))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

func (f *flood) print() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Printf("# --- flood: GET /metrics, a new random bearer token each, %d/s for %s on a fixed schedule, one keep-alive client, HTTPS without verification\n", f.rate, f.duration)
	figure("flood_planned_requests", int(float64(f.rate)*f.duration.Seconds()), "requests")
	figure("flood_sent_requests", f.sent, "requests")
	figure("flood_not_sent_outstanding_limit", f.notSent, "requests")
	sendSecs := f.sentEnd.Sub(f.start).Seconds()
	figure("flood_send_seconds", sendSecs, "s")
	figure("flood_achieved_rate", float64(f.sent)/sendSecs, "requests/s")
	responses := 0
	for _, c := range f.codes {
		responses += c
	}
	figure("flood_responses", responses, "responses")
	figure("flood_response_rate", float64(responses)/f.end.Sub(f.start).Seconds(), "responses/s")
	other := 0
	for code, c := range f.codes {
		if code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			other += c
		}
	}
	figure("flood_status_401", f.codes[http.StatusUnauthorized], "responses")
	figure("flood_status_429", f.codes[http.StatusTooManyRequests], "responses")
	figure("flood_status_other", other, "responses")
	if other > 0 {
		fmt.Printf("# flood: every status: %s\n", describeCodes(f.codes))
	}
	nerr := 0
	var es []string
	for e, c := range f.errs {
		nerr += c
		es = append(es, fmt.Sprintf("%dx %q", c, e))
	}
	sort.Strings(es)
	figure("flood_transport_errors", nerr, "requests")
	if nerr > 0 {
		fmt.Printf("# flood: transport errors: %s\n", strings.Join(es, ", "))
	}
	for _, code := range []int{http.StatusUnauthorized, http.StatusTooManyRequests} {
		l := f.lat[code]
		if len(l) == 0 {
			continue
		}
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		q := func(p float64) time.Duration { return l[min(len(l)-1, max(0, int(math.Ceil(p*float64(len(l))))-1))] }
		figure(fmt.Sprintf("flood_latency_%d_p50_seconds", code), q(0.5), "s")
		figure(fmt.Sprintf("flood_latency_%d_p99_seconds", code), q(0.99), "s")
		figure(fmt.Sprintf("flood_latency_%d_max_seconds", code), l[len(l)-1], "s")
	}
	f.printProbes()
}

// ---- the harness: test/framework's testing.TB outside of a test ----

// harness is the testing.TB that test/framework's Stack and helpers take,
// outside of a test (test/bench/rollout's, whose package main cannot be
// imported): Fatal aborts the run (guard recovers it), Cleanup registers a
// function that runs when the run ends, last first, and a failed run keeps
// the stack's logs (framework.KeptDir). Methods the framework does not
// call are left to the embedded nil TB (they would panic).
type harness struct {
	testing.TB

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

type fatal struct{ msg string }

func (h *harness) Helper()                         {}
func (h *harness) Name() string                    { return "bench-metrics" }
func (h *harness) Log(args ...any)                 { say("%s", fmt.Sprint(args...)) }
func (h *harness) Logf(format string, args ...any) { say(format, args...) }

func (h *harness) Fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
}

func (h *harness) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

func (h *harness) Error(args ...any)                 { h.Fail(); h.Log(args...) }
func (h *harness) Errorf(format string, args ...any) { h.Fail(); h.Logf(format, args...) }
func (h *harness) FailNow()                          { h.Fatal("FailNow") }

func (h *harness) Fatal(args ...any) {
	h.Fail()
	panic(fatal{fmt.Sprint(args...)})
}

func (h *harness) Fatalf(format string, args ...any) {
	h.Fail()
	panic(fatal{fmt.Sprintf(format, args...)})
}

func (h *harness) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

func (h *harness) finish() {
	h.mu.Lock()
	fns := h.cleanups
	h.cleanups = nil
	h.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// guard runs fn, turning a harness Fatal into an error, and runs the
// cleanups afterwards; an error marks the run failed first, so that the
// logs are kept.
func (h *harness) guard(fn func() error) (err error) {
	defer h.finish()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				h.Fail()
				panic(r)
			}
			err = errors.New(f.msg)
		}
		if err != nil {
			h.Fail()
		}
	}()
	return fn()
}

// ---- the Prometheus text exposition (as test/bench/rollout reads it) ----

// sample is one sample of the Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseMetrics reads the samples of a /metrics body whose name starts with
// prefix.
func parseMetrics(body, prefix string) []sample {
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			s.name = line[:i]
			for _, m := range labelPair.FindAllStringSubmatch(line[i+1:j], -1) {
				s.labels[m[1]] = m[2]
			}
			rest = line[j+1:]
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			s.name, rest = f[0], strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// histogram is the count and sum of one histogram series.
type histogram struct{ count, sum float64 }

// readHistogram returns the count and sum of the histogram name with the
// label kind=kind.
func readHistogram(samples []sample, name, kind string) histogram {
	var h histogram
	for _, s := range samples {
		if s.labels["kind"] != kind {
			continue
		}
		switch s.name {
		case name + "_count":
			h.count = s.value
		case name + "_sum":
			h.sum = s.value
		}
	}
	return h
}
