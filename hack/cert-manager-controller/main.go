// Command cert-manager-controller runs cert-manager's own controllers for
// Certificates, CertificateRequests, Issuers and ClusterIssuers, with the CA
// and SelfSigned issuers, from the module github.com/cert-manager/cert-manager.
//
// It stands in for upstream's cmd/controller main package only: that package
// is a separate Go module (github.com/cert-manager/cert-manager/controller-binary,
// in the directory cmd/controller) whose path does not match its directory, so
// the Go module proxy does not serve it, and the main module's zip leaves the
// directory out. The controllers it runs are cert-manager's, unchanged; this
// file only parses a few of upstream's flags, builds the controller context
// with upstream's defaults and starts the enabled controllers and the shared
// informers, as upstream's cmd/controller/app does. There is no leader
// election, no metrics or healthz server, and no ACME, Vault or Venafi
// issuer.
//
// hack/testbin.sh builds it; test/testenv runs it (Env.StartCertManager).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	logsapi "k8s.io/component-base/logs/api/v1"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"         // the CA issuer for the issuers controllers
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned" // the SelfSigned issuer
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
)

// defaultControllers are upstream's default controllers that this binary
// has: everything but ACME, Vault, Venafi, the ingress shim and metrics.
var defaultControllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	approver.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	issuing.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.FlushLogs()
}

func run() error {
	fs := pflag.NewFlagSet("cert-manager-controller", pflag.ContinueOnError)
	var (
		logging          = logsapi.NewLoggingConfiguration()
		master           = fs.String("master", "", "The address of the Kubernetes API server (overrides the kubeconfig).")
		kubeconfig       = fs.String("kubeconfig", "", "Path to a kubeconfig.")
		qps              = fs.Float32("kube-api-qps", 20, "Client-side QPS limit, when the apiserver has no API Priority and Fairness.")
		burst            = fs.Int("kube-api-burst", 50, "Client-side burst limit.")
		namespace        = fs.String("namespace", "", "Only watch this namespace (default: all). The clusterissuers controller does not run when set.")
		clusterResources = fs.String("cluster-resource-namespace", "kube-system", "Namespace of the Secrets that ClusterIssuers refer to.")
		leaderElect      = fs.Bool("leader-elect", false, "Leader election; only false is supported.")
		controllers      = fs.StringSlice("controllers", []string{"*"}, "Controllers to run: '*' for "+strings.Join(defaultControllers, ",")+"; '-name' disables one.")
		workers          = fs.Int("concurrent-workers", 5, "Workers per controller.")
		ownerRef         = fs.Bool("enable-certificate-owner-ref", false, "Make each Certificate the owner of its Secret.")
		minBackoff       = fs.Duration("certificate-request-minimum-backoff-duration", time.Hour, "First delay before a failed issuance is retried.")
		maxBackoff       = fs.Duration("certificate-request-maximum-backoff-duration", 32*time.Hour, "Longest delay before a failed issuance is retried.")
	)
	logf.AddFlags(logging, fs)
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if *leaderElect {
		return fmt.Errorf("--leader-elect=true is not supported by this build")
	}
	logf.InitLogs()
	if err := logf.ValidateAndApply(logging); err != nil {
		return err
	}
	enabled, err := enabledControllers(*controllers, *namespace)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	log := logf.FromContext(ctx)
	log.Info("starting cert-manager controllers", "version", util.AppVersion, "controllers", enabled, "namespace", *namespace, "clusterResourceNamespace", *clusterResources)

	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		APIServerHost:      *master,
		Kubeconfig:         *kubeconfig,
		KubernetesAPIQPS:   *qps,
		KubernetesAPIBurst: *burst,
		Namespace:          *namespace,
		IssuerOptions: controllerpkg.IssuerOptions{
			ClusterResourceNamespace:        *clusterResources,
			ClusterIssuerAmbientCredentials: true, // upstream's defaults
			IssuerAmbientCredentials:        false,
		},
		CertificateOptions: controllerpkg.CertificateOptions{
			EnableOwnerRef:                           *ownerRef,
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: *minBackoff,
			CertificateRequestMaximumBackoffDuration: *maxBackoff,
		},
		SchedulerOptions: controllerpkg.SchedulerOptions{MaxConcurrentChallenges: 60},
	})
	if err != nil {
		return err
	}
	shared, err := factory.Build()
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	known := controllerpkg.Known()
	for _, name := range enabled {
		c, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error {
			log.V(logf.InfoLevel).Info("starting controller", "controller", name)
			if err := c.Run(*workers, gctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	// The informers the controllers asked for exist now; start them.
	shared.SharedInformerFactory.Start(gctx.Done())
	shared.KubeSharedInformerFactory.Start(gctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())
	g.Go(func() error {
		// Tests wait for this line (test/testenv): from then on the
		// controllers act on what they see.
		for name, ok := range shared.SharedInformerFactory.WaitForCacheSync(gctx.Done()) {
			if !ok && gctx.Err() == nil {
				return fmt.Errorf("informer %v did not sync", name)
			}
		}
		for name, ok := range shared.KubeSharedInformerFactory.WaitForCacheSync(gctx.Done()) {
			if !ok && gctx.Err() == nil {
				return fmt.Errorf("informer %s did not sync", name)
			}
		}
		if gctx.Err() == nil {
			log.Info("informer caches synced; controllers running", "count", len(enabled))
		}
		return nil
	})
	err = g.Wait()
	shared.HTTP01ResourceMetadataInformersFactory.Shutdown()
	shared.KubeSharedInformerFactory.Shutdown()
	shared.SharedInformerFactory.Shutdown()
	log.Info("control loops exited")
	return err
}

// enabledControllers resolves --controllers as upstream does: "*" is every
// default controller, "-name" disables one, any other name enables one.
func enabledControllers(flags []string, namespace string) ([]string, error) {
	known := controllerpkg.Known()
	set := map[string]bool{}
	if slices.Contains(flags, "*") {
		for _, n := range defaultControllers {
			set[n] = true
		}
	}
	for _, f := range flags {
		name := strings.TrimPrefix(f, "-")
		if f == "*" {
			continue
		}
		if _, ok := known[name]; !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("unknown controller %q (known: %s)", name, strings.Join(names, ", "))
		}
		set[name] = !strings.HasPrefix(f, "-")
	}
	if namespace != "" {
		// As upstream: scoped to one namespace, ClusterIssuers are not watched.
		set[clusterissuers.ControllerName] = false
	}
	var names []string
	for n, on := range set {
		if on {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}
