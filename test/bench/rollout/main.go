package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

type options struct {
	servers        []int
	loads          []string
	fromVersion    string
	toVersion      string
	lameDuckGrace  string
	loadPublishers int
	loadRate       int
	loadSize       int
	loadWarmup     time.Duration
	observeEvery   time.Duration
	bareByHand     bool
	timeout        time.Duration
}

func main() {
	var o options
	servers := flag.String("servers", "3,5", "Cluster sizes, comma separated.")
	loads := flag.String("loads", "idle,loaded", "Loads, comma separated: idle (the probe publisher only), loaded (and the async publishers).")
	flag.StringVar(&o.fromVersion, "from-version", "2.15.2", "nats-server version the clusters are created on.")
	flag.StringVar(&o.toVersion, "to-version", "2.15.1", "The other version; the rollouts go back and forth.")
	flag.StringVar(&o.lameDuckGrace, "lame-duck-grace", "", "spec.lameDuck.gracePeriod of the clusters; empty: production's (duration 30s, grace period 10s).")
	flag.IntVar(&o.loadPublishers, "load-publishers", 3, "Async publishers of the loaded runs.")
	flag.IntVar(&o.loadRate, "load-rate", 1000, "Messages a second each async publisher offers.")
	flag.IntVar(&o.loadSize, "load-size", 256, "Bytes of each async publisher's messages.")
	flag.DurationVar(&o.loadWarmup, "load-warmup", 5*time.Second, "How long the async publishers run before the measurements.")
	flag.DurationVar(&o.observeEvery, "observe-every", 250*time.Millisecond, "How often the benchmark's own observer samples the cluster.")
	flag.BoolVar(&o.bareByHand, "bare-by-hand", true, "Restart one server by hand before each rollout and time it.")
	flag.DurationVar(&o.timeout, "rollout-timeout", 10*time.Minute, "How long one rollout may take.")
	flag.Parse()
	klog.SetOutput(os.Stderr)
	for _, f := range strings.Split(*servers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 3 {
			fmt.Fprintf(os.Stderr, "bench-rollout: --servers %q: each size must be a number of 3 or more (an R3 stream)\n", *servers)
			os.Exit(2)
		}
		o.servers = append(o.servers, n)
	}
	for _, l := range strings.Split(*loads, ",") {
		l = strings.TrimSpace(l)
		if l != "idle" && l != "loaded" {
			fmt.Fprintf(os.Stderr, "bench-rollout: --loads %q: idle or loaded\n", *loads)
			os.Exit(2)
		}
		o.loads = append(o.loads, l)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &harness{}
	if err := h.guard(func() error { return run(ctx, h, o) }); err != nil {
		fmt.Fprintln(os.Stderr, "bench-rollout:", err)
		os.Exit(1)
	}
}

// say prints progress to stderr; figures go to stdout (see figure).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// figure prints one figure: "name: value unit"; a float is rounded to the
// millisecond (3 digits), NaN printed as "none".
func figure(name string, value any, unit string) {
	switch v := value.(type) {
	case float64:
		if math.IsNaN(v) {
			fmt.Printf("%s: none %s\n", name, unit)
			return
		}
		fmt.Printf("%s: %s %s\n", name, strconv.FormatFloat(v, 'f', -1, 64), unit)
	case time.Duration:
		figure(name, round(v.Seconds(), 3), unit)
	default:
		fmt.Printf("%s: %v %s\n", name, v, unit)
	}
}

func round(v float64, digits int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return f
}

func nproc() string {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return strconv.Itoa(runtime.NumCPU())
	}
	return strings.TrimSpace(string(out))
}

// bench is one run: the stack and the options.
type bench struct {
	o          options
	h          *harness
	s          *framework.Stack
	metricsURL string
}

const clusterName = "demo"

func run(ctx context.Context, h *harness, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	head, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("# nats-operator rollout benchmark (hack/bench-rollout.sh), commit %s, %s\n",
		strings.TrimSpace(string(head)), time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("# go %s; %s cores; figures taken on a machine shared with other work\n", runtime.Version(), nproc())
	grace := o.lameDuckGrace
	if grace == "" {
		grace = clusterv1beta1.DefaultLameDuckGracePeriod.String() + " (production)"
	}
	fmt.Printf("# servers %v, loads %v, %s <-> %s, lame duck grace %s, load %d x %d msg/s x %d B, observer every %s\n",
		o.servers, o.loads, o.fromVersion, o.toVersion, grace, o.loadPublishers, o.loadRate, o.loadSize, o.observeEvery)

	say("starting the stack (control plane, local node, controller)")
	// The controller binary the stack builds goes last, once the stack
	// has stopped (cleanups run last registered first).
	h.Cleanup(framework.RemoveBinaries)
	s := framework.StartStack(ctx, h, "--metrics-secure=false")
	b := &bench{o: o, h: h, s: s, metricsURL: strings.Replace(s.Controller.MetricsURL, "https://", "http://", 1)}
	say("controller log %s", s.Controller.LogPath)

	for _, n := range o.servers {
		if err := b.clusterSize(ctx, n); err != nil {
			return err
		}
	}
	say("done")
	return nil
}

// clusterSize runs the scenarios of one cluster size on a cluster of its
// own, deleted afterwards.
func (b *bench) clusterSize(ctx context.Context, n int) error {
	ns := fmt.Sprintf("bench-s%d", n)
	s := b.s
	say("creating a %d-server cluster on %s in namespace %s", n, b.o.fromVersion, ns)
	s.CreateNamespace(ctx, b.h, ns)
	start := time.Now()
	s.ApplyExample(ctx, b.h, ns, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() != "NatsCluster" {
			return
		}
		_ = unstructured.SetNestedField(o.Object, int64(n), "spec", "replicas")
		_ = unstructured.SetNestedField(o.Object, b.o.fromVersion, "spec", "version")
		framework.ProductionLameDuck(o)
		if b.o.lameDuckGrace != "" {
			_ = unstructured.SetNestedField(o.Object, b.o.lameDuckGrace, "spec", "lameDuck", "gracePeriod")
		}
	})
	s.WaitSettledUpToDate(ctx, b.h, ns, clusterName, 5*time.Minute)
	say("%d servers up, settled and up to date in %s", n, time.Since(start).Round(time.Second))
	defer b.deleteCluster(ns)

	urls := s.PodURLs(ctx, b.h, ns, clusterName)
	conn, js, err := connect(urls, "bench-setup")
	if err != nil {
		return err
	}
	framework.CreateStream(ctx, b.h, js, "BENCH", 3)
	conn.Close()
	// The stream's group is part of Settled from here on.
	s.WaitSettledUpToDate(ctx, b.h, ns, clusterName, 2*time.Minute)

	pr, err := startProbe(ctx, urls, "BENCH.probe")
	if err != nil {
		return err
	}
	defer pr.stop()

	version := b.o.fromVersion
	for _, l := range b.o.loads {
		next := b.o.toVersion
		if version == b.o.toVersion {
			next = b.o.fromVersion
		}
		if err := b.scenario(ctx, scenarioSpec{ns: ns, servers: n, load: l, from: version, to: next, probe: pr}); err != nil {
			return err
		}
		version = next
	}
	return nil
}

// serverNames are demo-0 .. demo-<n-1>.
func serverNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, render.ServerName(clusterName, int32(i)))
	}
	return out
}

// deleteCluster releases the NatsCluster's finalizer and deletes its
// namespace, then waits (at most 3 minutes) until its pods are gone, so
// that the next cluster size runs alone.
func (b *bench) deleteCluster(ns string) {
	ctx := context.Background()
	say("deleting namespace %s", ns)
	_, _ = b.s.Nats.ClusterV1beta1().NatsClusters(ns).Patch(ctx, clusterName, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	_ = b.s.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	_, err := poll.Until(3*time.Minute, time.Second, func() error {
		pods, err := b.s.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	if err != nil {
		say("namespace %s: %v", ns, err)
	}
}
