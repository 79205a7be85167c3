package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/internal/version"
	"github.com/nats-operator/nats-operator/pkg/controller"
	"github.com/nats-operator/nats-operator/pkg/controller/backups"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/pkg/render"
)

type options struct {
	reloadTimeout       time.Duration
	systemUserLifetime  time.Duration
	restRequeue         time.Duration
	pauseBeforeStep     time.Duration
	kubeconfig          string
	namespace           string
	workers             int
	leaderElect         bool
	leaseName           string
	leaseNamespace      string
	leaseDuration       time.Duration
	renewDeadline       time.Duration
	retryPeriod         time.Duration
	controllerNamespace string
	healthAddr          string
	metricsAddr         string
	metricsSecure       bool
	metricsCertDir      string
	workerStallTimeout  time.Duration
	resync              time.Duration
	qps                 float64
	burst               int
	jobImage            string
	backupWorkers       int
	podTemplatePolicy   string
	allowedImages       string
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "backup" || os.Args[1] == "restore") {
		os.Exit(runJob(os.Args[1], os.Args[2:]))
	}
	if versionRequested(os.Args[1:]) {
		printVersion()
		return
	}
	klog.InitFlags(nil)
	var o options
	registerFlags(flag.CommandLine, &o)
	flag.Usage = usage
	flag.Parse()
	klog.InfoS("Starting nats-operator", "version", version.Get().String())
	if o.controllerNamespace == "" {
		o.controllerNamespace = os.Getenv("POD_NAMESPACE")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "Exited")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

// builtinConfig is cfg for the clients of Kubernetes' own kinds (pods,
// StatefulSets, ConfigMaps, Events, Leases...): their requests, responses
// and watch events in protobuf, as kube-controller-manager and the kubelet
// send them, which costs the API server and the controller less CPU to
// encode and decode than JSON. The NatsCluster client stays on JSON: custom
// resources have no protobuf encoding.
func builtinConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	policy, err := render.ParsePodTemplatePolicy(o.podTemplatePolicy, o.allowedImages)
	if err != nil {
		return err
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("building the client config: %w", err)
	}
	cfg.UserAgent = "nats-operator"
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	kubeCfg := builtinConfig(cfg)
	kubeClient, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return err
	}
	natsClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Events get a client, and so a client-side rate limit, of their own
	// (controller.Options.EventClient).
	eventClient, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := controller.NewMetrics(reg)

	metaClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	inf, err := controller.NewInformerSet(kubeClient, natsClient, metaClient, controller.ParseNamespaces(o.namespace), o.resync)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctrl := controller.New(ctx, controller.Options{
		KubeClient: kubeClient, EventClient: eventClient, NatsClient: natsClient, Informers: inf.Informers, Dynamic: dyn, Metrics: metrics,
		ControllerNamespace: o.controllerNamespace, ReloadTimeout: o.reloadTimeout, RestRequeue: o.restRequeue, SystemUserLifetime: o.systemUserLifetime,
		PauseBeforeStep: o.pauseBeforeStep, LeaseNamespace: leaseNamespace(o),
		PodTemplatePolicy:  policy,
		WorkerStallTimeout: stallTimeout(o.workerStallTimeout),
	})

	bctrl := backups.New(ctx, backups.Options{KubeClient: kubeClient, NatsClient: natsClient, Informers: inf.Informers,
		Jobs: inf.Backups, Image: o.jobImage})
	runBoth := func(ctx context.Context) error {
		go func() {
			if err := bctrl.Run(ctx, o.backupWorkers); err != nil {
				logger.Error(err, "The NatsBackup controller stopped")
			}
		}()
		return ctrl.Run(ctx, o.workers)
	}

	// Caches fill whether or not this replica leads, so a new leader starts warm.
	inf.Start(ctx.Done())
	defer inf.Shutdown()
	go ctrl.WaitForCacheSync(ctx)

	leaderHealth := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	servers := []*http.Server{healthServer(o.healthAddr, leaderHealth, ctrl)}
	if o.metricsAddr != "" {
		ms, err := metricsServer(o.metricsAddr, o.metricsSecure, o.metricsCertDir, kubeCfg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if err != nil {
			return err
		}
		servers = append(servers, ms)
	}
	for _, s := range servers {
		go serve(ctx, s)
	}
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(shutdownCtx)
		}
	}()

	if !o.leaderElect {
		return runBoth(ctx)
	}
	return runLeading(ctx, o, kubeClient, leaderHealth, runBoth)
}

// runLeading runs the workers only while this replica holds the Lease. On
// SIGTERM the workers drain first; only then is the lease released, so no
// second replica acts while a step of this one is in flight.
func runLeading(ctx context.Context, o options, kubeClient kubernetes.Interface, health *leaderelection.HealthzAdaptor, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	// The identity names the pod (POD_NAME from the downward API; else the
	// hostname, which is the pod's name in a pod) and the process.
	host := os.Getenv("POD_NAME")
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return err
		}
	}
	id := fmt.Sprintf("%s_%d", host, os.Getpid())
	ns := leaseNamespace(o)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: o.leaseName, Namespace: ns},
		Client:     kubeClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}

	// The election runs on its own context, cancelled only after the workers
	// have drained.
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	workersDone := make(chan struct{})
	var lost bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        health,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leCtx context.Context) {
				defer close(workersDone)
				logger.Info("Started leading", "lease", klog.KRef(ns, o.leaseName), "identity", id)
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				go func() {
					select {
					case <-leCtx.Done():
						cancel()
					case <-runCtx.Done():
					}
				}()
				if err := run(runCtx); err != nil {
					logger.Error(err, "Controller stopped")
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = true
				}
				logger.Info("Stopped leading", "identity", id)
			},
		},
	})
	if err != nil {
		return err
	}
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		elector.Run(leCtx)
	}()

	select {
	case <-ctx.Done():
		// Shutting down: wait for the workers to drain (if leading), then release.
		if elector.IsLeader() {
			<-workersDone
		}
		leCancel()
		<-electionDone
		return nil
	case <-electionDone:
		if lost {
			return errors.New("leader election lost")
		}
		return nil
	}
}

func healthServer(addr string, leader *leaderelection.HealthzAdaptor, ctrl *controller.Controller) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := leader.Check(r); err != nil {
			http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if err := ctrl.Healthy(time.Now()); err != nil {
			http.Error(w, "workers: "+err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ctrl.Ready():
			fmt.Fprintln(w, "ok")
		default:
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
		}
	})
	return &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// leaseNamespace is where the controller holds its Leases (leader
// election, the supercluster's turns): --leader-elect-namespace, else the
// pod's namespace, else the one namespace of --namespace, else nats-system.
func leaseNamespace(o options) string {
	ns := o.leaseNamespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if nss := controller.ParseNamespaces(o.namespace); ns == "" && len(nss) == 1 {
		ns = nss[0]
	}
	if ns == "" {
		ns = "nats-system"
	}
	return ns
}

// stallTimeout is --worker-stall-timeout for controller.Options: 0 there
// means the default, so 0 or less here (never) is passed as negative.
func stallTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
