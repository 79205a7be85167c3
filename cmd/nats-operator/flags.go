package main

import (
	"flag"
	"strings"
	"time"

	"github.com/nats-operator/nats-operator/pkg/controller"
	"github.com/nats-operator/nats-operator/pkg/controller/backups"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// registerFlags registers the controller's own flags on fs, writing into o.
// main registers them on flag.CommandLine, beside klog's (klog.InitFlags);
// TestREADMEListsEveryFlag lists them from here, so every flag of the
// controller belongs in this function.
func registerFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Empty: the in-cluster config.")
	fs.StringVar(&o.namespace, "namespace", "", "Namespaces to watch, comma-separated (each listed and watched on its own, so Roles in them suffice: see manifests/namespaced). Empty: all namespaces.")
	fs.IntVar(&o.workers, "workers", 2, "Number of NatsClusters observed and decided in parallel; the writes a sync decided go on without holding a worker.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader with a Lease before syncing, so only one replica acts.")
	fs.StringVar(&o.leaseName, "leader-elect-lease-name", "nats-operator", "Name of the leader election Lease.")
	fs.StringVar(&o.leaseNamespace, "leader-elect-namespace", "", "Namespace of the Lease. Empty: the pod's namespace, else --namespace, else nats-system.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits, after the leader's last renewal, before it takes the Lease (a leader that stops gracefully releases it at once).")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying a renewal before it stops leading; less than --leader-elect-lease-duration.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often the leader renews the Lease (one API write each: the only writes of a controller at rest) and a standby tries to take it.")
	fs.StringVar(&o.healthAddr, "health-addr", ":8081", "Address serving /healthz and /readyz.")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "Address serving /metrics. Empty disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS to the bearer tokens the API server authenticates (TokenReview) and authorizes to get /metrics (SubjectAccessReview; the ClusterRole nats-operator-metrics-reader), through a client of their own (20/s, burst 40), at most 8 at once (429 beyond). false: plain HTTP to anyone.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with the metrics serving certificate and key (tls.crt, tls.key: a kubernetes.io/tls Secret mounted; re-read when they change). Empty: a self-signed certificate made at start.")
	fs.DurationVar(&o.workerStallTimeout, "worker-stall-timeout", controller.DefaultWorkerStallTimeout, "/healthz fails when a sync has run this long, or NatsClusters are queued and no worker took or finished one for this long, while this replica leads. 0 or less: never.")
	fs.DurationVar(&o.resync, "resync", 10*time.Minute, "Informer resync period.")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "Requests per second to the Kubernetes API (client-side limit; the API server's priority and fairness protects it as well).")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "Burst of requests to the Kubernetes API above --kube-api-qps.")
	fs.DurationVar(&o.restRequeue, "rest-requeue", controller.DefaultRestRequeue,
		"How often a cluster at rest (Settled, up to date, holding nothing) is observed when no pod or object event syncs it; each observation asks every server 4 monitoring endpoints. A lag no pod shows (a stream falling behind) is seen up to this late.")
	fs.DurationVar(&o.pauseBeforeStep, "pause-before-step", 0,
		"for tests only: pause this long between deciding a step and writing it (a test injects a fault there); 0 in production")
	fs.DurationVar(&o.systemUserLifetime, "system-user-lifetime", controller.DefaultSystemUserLifetime,
		"How long each system account user the controller mints (operator mode with the NatsOperatorTrust's systemAccountSigningKey) is valid; a new one is minted in the last third.")
	fs.DurationVar(&o.reloadTimeout, "reload-timeout", controller.DefaultReloadTimeout,
		"How long a server may take to report the config it was reloaded onto (a kubelet updates a mounted ConfigMap within about a minute) before it is restarted instead.")
	fs.StringVar(&o.controllerNamespace, "controller-namespace", "", "Namespace the controller runs in: every cluster's NetworkPolicy admits it to the client port ($SYS) and the monitoring port. Empty: the pod's namespace (POD_NAMESPACE), else "+controller.DefaultControllerNamespace+".")
	fs.StringVar(&o.jobImage, "job-image", backups.DefaultImage, "Image of the Jobs that back up and restore streams (NatsBackup, NatsRestore): this controller's own image, which runs `nats-operator backup` and `nats-operator restore`.")
	fs.IntVar(&o.backupWorkers, "backup-workers", 1, "Number of NatsBackups and NatsRestores synced in parallel.")
	fs.StringVar(&o.podTemplatePolicy, "pod-template-policy", render.PodTemplatePolicyRestricted,
		"What a NatsCluster may ask of its servers' pods. restricted: no other ServiceAccount, images only from --pod-template-allowed-images, no Secret (volume or env), claim, CSI, hostPath, ephemeral or service account token volume; a cluster asking more is held InvalidSpec. any: every podTemplate the CRD accepts, so creating a NatsCluster equals pods/create in its namespace.")
	fs.StringVar(&o.allowedImages, "pod-template-allowed-images", strings.Join(render.DefaultAllowedImages(), ","),
		"Under --pod-template-policy=restricted, the images a NatsCluster may run (spec.image, spec.metrics.image, podTemplate sidecars), comma-separated: image repositories (any tag or digest) or prefixes ending in /.")
}
