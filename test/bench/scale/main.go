package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

type options struct {
	clusters      int
	objects       int
	namespaces    int
	window        time.Duration
	monitorWindow time.Duration
	settle        time.Duration
	workers       string
	fromVersion   string
	toVersion     string
	keep          bool
	extraArgs     string
	kcmArgs       string
	jetStream     bool
}

func main() {
	var o options
	flag.IntVar(&o.clusters, "clusters", 100, "NatsClusters of 1 server each.")
	flag.IntVar(&o.objects, "objects", 10000, "Unrelated objects (40% ConfigMaps, 20% Secrets of 50 kB, 40% Pods).")
	flag.IntVar(&o.namespaces, "namespaces", 10, "Namespaces the NatsClusters are spread over (and the unrelated objects).")
	flag.DurationVar(&o.window, "window", 60*time.Second, "Measurement window at rest.")
	flag.DurationVar(&o.monitorWindow, "monitor-window", 120*time.Second, "Window of the monitoring requests at rest (from the start of --window): a cluster at rest is observed every 2 minutes.")
	flag.DurationVar(&o.settle, "settle", 40*time.Second, "Wait before a window at rest, so that syncs triggered by what came before are over.")
	flag.StringVar(&o.workers, "workers", "1,4,16", "Worker counts of the version changes, comma separated; empty: none.")
	flag.StringVar(&o.fromVersion, "from-version", "2.15.2", "nats-server version the clusters are created on.")
	flag.StringVar(&o.toVersion, "to-version", "2.15.1", "The other version of the version changes (back and forth).")
	flag.BoolVar(&o.keep, "keep", false, "Keep the work directory (logs) when done.")
	flag.BoolVar(&o.jetStream, "jetstream", false, "Keep the example's spec.jetstream: a 1-server JetStream cluster never becomes Ready (see doc.go).")
	flag.StringVar(&o.extraArgs, "controller-args", "", "Extra arguments of the controller, space separated.")
	flag.StringVar(&o.kcmArgs, "kcm-args", "", "Extra arguments of kube-controller-manager, space separated (\"--kube-api-qps=100 --kube-api-burst=200\": is its StatefulSet controller what queues?).")
	flag.Parse()
	klog.SetOutput(os.Stderr)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// say prints progress to stderr; figures go to stdout (see figure).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// figure prints one figure: "name: value unit".
func figure(name string, value any, unit string) {
	switch v := value.(type) {
	case float64:
		fmt.Printf("%s: %s %s\n", name, strconv.FormatFloat(v, 'f', -1, 64), unit)
	default:
		fmt.Printf("%s: %v %s\n", name, v, unit)
	}
}

func round(v float64, digits int) float64 {
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

func run(ctx context.Context, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "nats-operator-bench-scale-")
	if err != nil {
		return err
	}
	defer func() {
		if o.keep {
			say("kept %s", work)
			return
		}
		_ = os.RemoveAll(work)
	}()

	fmt.Printf("# nats-operator scale benchmark (hack/bench-scale.sh), %s\n", time.Now().UTC().Format(time.RFC3339))
	head, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("# commit %s; go %s\n", strings.TrimSpace(string(head)), runtime.Version())
	figure("machine_cores (nproc)", nproc(), "cores")
	figure("machine_memory", memTotalGiB(), "GiB")
	fmt.Println("# figures were taken on a machine shared with other work (e2e tests)")
	if o.extraArgs != "" || o.kcmArgs != "" {
		fmt.Printf("# controller arguments added: %q; kube-controller-manager arguments added: %q\n", o.extraArgs, o.kcmArgs)
	}

	say("starting the control plane with kube-controller-manager")
	env, stopEnv, err := testenv.StartMain(testenv.Options{ControllerManager: true, ControllerManagerArgs: strings.Fields(o.kcmArgs)})
	if err != nil {
		return err
	}
	defer stopEnv()

	say("starting the local node (pods run as nats-server processes; logs in %s)", filepath.Join(work, "node", "logs"))
	node, err := localnode.New(env.Config, localnode.Options{Root: filepath.Join(work, "node")})
	if err != nil {
		return err
	}
	if err := node.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	defer node.Stop()

	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	b := &bench{
		o:    o,
		env:  env,
		kube: kubernetes.NewForConfigOrDie(cfg),
		nats: versioned.NewForConfigOrDie(cfg),
	}
	// The informers stop before Shutdown waits for them (Shutdown blocks
	// until their goroutines end, which is when their stop channel closes:
	// with ctx's, the bench hung after "done").
	factory := natsinformers.NewSharedInformerFactory(b.nats, 0)
	b.clusters = factory.Cluster().V1beta1().NatsClusters().Lister()
	b.watched = &watchTimes{}
	if _, err := factory.Cluster().V1beta1().NatsClusters().Informer().AddEventHandler(b.watched.handler()); err != nil {
		return err
	}
	informersCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informersCtx.Done())
	defer factory.Shutdown()
	defer stopInformers()
	if err := synced(factory.WaitForCacheSync(ctx.Done())); err != nil {
		return err
	}
	// The servers' pods, for where a cluster's rollout spends its time
	// (and, below, their StatefulSets).
	b.pods = newPodPhases()
	podFactory := kubeinformers.NewSharedInformerFactoryWithOptions(b.kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = clusterv1beta1.LabelCluster
	}))
	if _, err := podFactory.Core().V1().Pods().Informer().AddEventHandler(b.pods.handler()); err != nil {
		return err
	}
	// The servers' StatefulSets, for when each cluster's first step came.
	if _, err := podFactory.Apps().V1().StatefulSets().Informer().AddEventHandler(b.watched.handler()); err != nil {
		return err
	}
	podFactory.Start(informersCtx.Done())
	defer podFactory.Shutdown()
	defer stopInformers()
	if err := synced(podFactory.WaitForCacheSync(ctx.Done())); err != nil {
		return err
	}

	say("building and starting the controller as ServiceAccount nats-system/nats-operator")
	ctrl, err := newController(ctx, env, root, work, o)
	if err != nil {
		return err
	}
	defer ctrl.stop()
	if err := ctrl.start(ctx, 0); err != nil {
		return err
	}

	if err := b.createUnrelated(ctx); err != nil {
		return err
	}
	if err := b.atRest(ctx, ctrl, "rest_0_clusters", false); err != nil {
		return err
	}
	if err := b.createClusters(ctx); err != nil {
		return err
	}
	if err := b.atRest(ctx, ctrl, fmt.Sprintf("rest_%d_clusters", o.clusters), true); err != nil {
		return err
	}
	version := o.fromVersion
	for _, w := range strings.Split(o.workers, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		n, err := strconv.Atoi(w)
		if err != nil {
			return fmt.Errorf("--workers: %w", err)
		}
		next := o.toVersion
		if version == o.toVersion {
			next = o.fromVersion
		}
		if err := b.versionChange(ctx, ctrl, n, version, next); err != nil {
			return err
		}
		version = next
	}
	say("done")
	return nil
}

func memTotalGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return round(kb/1024/1024, 1)
		}
	}
	return 0
}

// synced says which informer's cache did not sync, if one did not.
func synced(m map[reflect.Type]bool) error {
	for typ, ok := range m {
		if !ok {
			return fmt.Errorf("watching %v: the cache did not sync", typ)
		}
	}
	return nil
}
