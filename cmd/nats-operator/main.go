package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

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
	klog.InitFlags(nil)
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Empty: the in-cluster config.")
	flag.StringVar(&o.namespace, "namespace", "", "Namespaces to watch, comma-separated (each listed and watched on its own, so Roles in them suffice: see manifests/namespaced). Empty: all namespaces.")
	flag.IntVar(&o.workers, "workers", 2, "Number of NatsClusters synced in parallel.")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader with a Lease before syncing, so only one replica acts.")
	flag.StringVar(&o.leaseName, "leader-elect-lease-name", "nats-operator", "Name of the leader election Lease.")
	flag.StringVar(&o.leaseNamespace, "leader-elect-namespace", "", "Namespace of the Lease. Empty: the pod's namespace, else --namespace, else nats-system.")
	flag.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits, after the leader's last renewal, before it takes the Lease (a leader that stops gracefully releases it at once).")
	flag.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying a renewal before it stops leading; less than --leader-elect-lease-duration.")
	flag.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often the leader renews the Lease (one API write each: the only writes of a controller at rest) and a standby tries to take it.")
	flag.StringVar(&o.healthAddr, "health-addr", ":8081", "Address serving /healthz and /readyz.")
	flag.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "Address serving /metrics. Empty disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS to the bearer tokens the API server authenticates (TokenReview) and authorizes to get /metrics (SubjectAccessReview; the ClusterRole nats-operator-metrics-reader). false: plain HTTP to anyone.")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with the metrics serving certificate and key (tls.crt, tls.key: a kubernetes.io/tls Secret mounted; re-read when they change). Empty: a self-signed certificate made at start.")
	flag.DurationVar(&o.workerStallTimeout, "worker-stall-timeout", controller.DefaultWorkerStallTimeout, "/healthz fails when a sync has run this long, or NatsClusters are queued and no worker took or finished one for this long, while this replica leads. 0 or less: never.")
	flag.DurationVar(&o.resync, "resync", 10*time.Minute, "Informer resync period.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Requests per second to the Kubernetes API (client-side limit; the API server's priority and fairness protects it as well).")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Burst of requests to the Kubernetes API above --kube-api-qps.")
	flag.DurationVar(&o.restRequeue, "rest-requeue", controller.DefaultRestRequeue,
		"How often a cluster at rest (Settled, up to date, holding nothing) is observed when no pod or object event syncs it; each observation asks every server 4 monitoring endpoints. A lag no pod shows (a stream falling behind) is seen up to this late.")
	flag.DurationVar(&o.pauseBeforeStep, "pause-before-step", 0,
		"for tests only: pause this long between deciding a step and writing it (a test injects a fault there); 0 in production")
	flag.DurationVar(&o.systemUserLifetime, "system-user-lifetime", controller.DefaultSystemUserLifetime,
		"How long each system account user the controller mints (operator mode with the NatsOperatorTrust's systemAccountSigningKey) is valid; a new one is minted in the last third.")
	flag.DurationVar(&o.reloadTimeout, "reload-timeout", controller.DefaultReloadTimeout,
		"How long a server may take to report the config it was reloaded onto (a kubelet updates a mounted ConfigMap within about a minute) before it is restarted instead.")
	flag.StringVar(&o.controllerNamespace, "controller-namespace", "", "Namespace the controller runs in: every cluster's NetworkPolicy admits the monitoring port from it. Empty: the pod's namespace (POD_NAMESPACE), else "+controller.DefaultControllerNamespace+".")
	flag.StringVar(&o.jobImage, "job-image", backups.DefaultImage, "Image of the Jobs that back up and restore streams (NatsBackup, NatsRestore): this controller's own image, which runs `nats-operator backup` and `nats-operator restore`.")
	flag.IntVar(&o.backupWorkers, "backup-workers", 1, "Number of NatsBackups and NatsRestores synced in parallel.")
	flag.StringVar(&o.podTemplatePolicy, "pod-template-policy", render.PodTemplatePolicyRestricted,
		"What a NatsCluster may ask of its servers' pods. restricted: no other ServiceAccount, images only from --pod-template-allowed-images, no Secret (volume or env), claim, CSI, hostPath, ephemeral or service account token volume; a cluster asking more is held InvalidSpec. any: every podTemplate the CRD accepts, so creating a NatsCluster equals pods/create in its namespace.")
	flag.StringVar(&o.allowedImages, "pod-template-allowed-images", strings.Join(render.DefaultAllowedImages(), ","),
		"Under --pod-template-policy=restricted, the images a NatsCluster may run (spec.image, spec.metrics.image, podTemplate sidecars), comma-separated: image repositories (any tag or digest) or prefixes ending in /.")
	flag.Parse()
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
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	natsClient, err := versioned.NewForConfig(cfg)
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
		KubeClient: kubeClient, NatsClient: natsClient, Informers: inf.Informers, Dynamic: dyn, Metrics: metrics,
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
		ms, err := metricsServer(o.metricsAddr, o.metricsSecure, o.metricsCertDir, kubeClient, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
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
