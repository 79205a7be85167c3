package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	natsscheme "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/scheme"
	clusterinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions/cluster/v1beta1"
	trustinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions/trust/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// QueueName names the workqueue; its metrics carry name="natscluster".
const QueueName = "natscluster"

// FieldManager is the field manager of every write.
const FieldManager = "nats-operator"

// Informers are the shared informers the controller reads from. The
// StatefulSet, ConfigMap, Service, Pod and PDB informers should be
// restricted to objects labelled app.kubernetes.io/managed-by=nats-operator.
type Informers struct {
	Clusters       clusterinformers.NatsClusterInformer
	OperatorTrusts trustinformers.NatsOperatorTrustInformer
	AccountTrusts  trustinformers.NatsAccountTrustInformer
	StatefulSets   appsinformers.StatefulSetInformer
	ConfigMaps     coreinformers.ConfigMapInformer
	Services       coreinformers.ServiceInformer
	Pods           coreinformers.PodInformer
	PDBs           policyinformers.PodDisruptionBudgetInformer
	// Secrets is a metadata-only informer of Secrets (SecretsResource,
	// transformed by StripSecretMetadata): values are read by name.
	Secrets informers.GenericInformer
	// NetworkPolicies, like the other objects the controller owns, need
	// only its managed-by label.
	NetworkPolicies networkinginformers.NetworkPolicyInformer
	// Backups and Restores are every NatsBackup and NatsRestore: the
	// NatsCluster controller reads those of a JetStream migration (its
	// own), the backups controller all of them.
	Backups  clusterinformers.NatsBackupInformer
	Restores clusterinformers.NatsRestoreInformer
}

// clusterObserver is what the controller needs of an *observe.Observer; unit
// tests give a fixed Snapshot instead.
type clusterObserver interface {
	Observe(ctx context.Context, t observe.Target) *observe.Snapshot
	System(ctx context.Context, t observe.Target) (*observe.SystemClient, error)
	ViewRemoteMetaLeader(ctx context.Context, t observe.Target, snap *observe.Snapshot) bool
	Forget(cluster string)
	Close()
}

// Controller reconciles NatsClusters.
type Controller struct {
	// kubeClient writes Kubernetes objects: Services, PDBs, StatefulSets,
	// ConfigMaps, Pods (deletion), Events.
	kubeClient kubernetes.Interface
	// natsClient writes NatsClusters (status and one-shot annotations).
	natsClient versioned.Interface
	// dynamic reads and writes cert-manager Certificates; nil without.
	dynamic dynamic.Interface

	// gatherer reads every fact a sync decides on, through the listers
	// of the informers and the reads by name of Sources.API; nothing else
	// of the controller reads (TestOnlyTheGathererReads).
	gatherer gatherer
	// api is the gatherer's reader by name (Sources.API); its Secret value
	// cache is forgotten when a Secret is deleted.
	api *apiReader
	// checkFacts, when set (the unit tests), is called after each sync
	// with the facts and a copy taken right after gathering: nothing may
	// change them.
	checkFacts func(after, gathered *facts)
	// synced are the HasSynced funcs of every informer above.
	synced []cache.InformerSynced

	// queue holds the keys of NatsClusters to sync.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// finishing counts the syncs whose writes and report go on after their
	// worker took the next key (processNextWorkItem).
	finishing sync.WaitGroup
	// recorder emits Events on NatsClusters.
	recorder record.EventRecorder
	// metrics counts writes and steps.
	metrics *Metrics
	// observer asks the NATS servers; it keeps connections per cluster.
	observer clusterObserver
	// ownWrites keeps syncs from planning on a cache that has not yet
	// seen the controller's own last write of a NatsCluster.
	ownWrites *ownWrites
	// catchUps times the looks at a step waiting for members catching up.
	catchUps *catchUps
	// quickLooksWithin is the window of lookAgainAtOnce (0: the constant
	// quickLooksWithin; a unit test that counts looks widens it, so that a
	// loaded machine does not end the looks early).
	quickLooksWithin time.Duration
	// reloadSends paces the reloads sent while one is in flight, and
	// removeSends the evacuations and peer removals of a scale-down.
	reloadSends pacer
	removeSends pacer
	// reloadTimeout is how long a reload may go unconfirmed before it
	// becomes a restart (Options.ReloadTimeout).
	reloadTimeout time.Duration
	// restRequeue is how often a cluster at rest is observed when nothing
	// else syncs it (DefaultRestRequeue; --rest-requeue).
	restRequeue time.Duration
	// pauseBeforeStep: Options.PauseBeforeStep.
	pauseBeforeStep time.Duration
	// podTemplatePolicy: Options.PodTemplatePolicy.
	podTemplatePolicy render.PodTemplatePolicy
	// controllerNamespace is where the controller runs
	// (Options.ControllerNamespace): NetworkPolicies admit monitoring from it.
	controllerNamespace string
	// leaseNamespace is where the supercluster Lease lives.
	leaseNamespace string

	// health tells /healthz whether the workers still make progress.
	health *WorkerHealth

	// cachesSynced is set once every informer has synced (for /readyz).
	cachesSynced sync.Once
	ready        chan struct{}
}

// Options are what New builds a controller from.
type Options struct {
	// KubeClient and NatsClient read by name and write; Informers are the
	// caches every sync reads (NewInformerSet).
	KubeClient kubernetes.Interface
	// EventClient writes the Events (nil: KubeClient). A client of its own
	// has a client-side rate limit of its own, so Events, which are
	// written in the background and retried, never wait in front of a
	// step's requests: with 100 clusters stepping at once the step's
	// requests waited on that limit.
	EventClient kubernetes.Interface
	NatsClient  versioned.Interface
	Informers   Informers
	// Dynamic reaches cert-manager's Certificates and prometheus-operator's
	// PodMonitors; nil without (spec.tls.certificate is then held).
	Dynamic dynamic.Interface
	// Metrics counts writes, steps and the workqueue.
	Metrics *Metrics
	// ControllerNamespace is where the controller runs: NetworkPolicies
	// admit monitoring from it (empty: DefaultControllerNamespace).
	ControllerNamespace string
	// LeaseNamespace is where the controller may hold Leases (its leader
	// election's namespace): the supercluster Lease lives there (empty:
	// DefaultControllerNamespace).
	LeaseNamespace string
	// ReloadTimeout is how long a reloaded server may take to report its
	// new revision before the reload becomes a restart (0:
	// DefaultReloadTimeout; --reload-timeout).
	ReloadTimeout time.Duration
	// RestRequeue is how often a cluster at rest (Settled, up to date,
	// holding nothing) is observed when no event syncs it (0:
	// DefaultRestRequeue; --rest-requeue).
	RestRequeue time.Duration
	// SystemUserLifetime is how long each system account user minted with
	// the NatsOperatorTrust's systemAccountSigningKey is valid (0:
	// DefaultSystemUserLifetime; --system-user-lifetime).
	SystemUserLifetime time.Duration
	// PauseBeforeStep is for tests only (--pause-before-step): a sync that
	// took a step pauses this long after deciding it and before writing
	// it, logging "Pausing before the step", so a test can inject a fault
	// (a drain) between the observation and the step. 0 in production.
	PauseBeforeStep time.Duration
	// PodTemplatePolicy is what a NatsCluster may ask of its pods
	// (--pod-template-policy, --pod-template-allowed-images): a cluster it
	// does not allow is held InvalidSpec naming the field, nothing written.
	// The zero value allows everything the CRD accepts (policy "any");
	// cmd/nats-operator defaults to "restricted".
	PodTemplatePolicy render.PodTemplatePolicy
	// WorkerStallTimeout is how long the workers may make no progress
	// while NatsClusters wait before Healthy fails (0:
	// DefaultWorkerStallTimeout; negative: never; --worker-stall-timeout).
	WorkerStallTimeout time.Duration
}

// New builds a controller from o and registers its event handlers.
func New(ctx context.Context, o Options) *Controller {
	kubeClient, natsClient, inf, metrics := o.KubeClient, o.NatsClient, o.Informers, o.Metrics
	logger := klog.FromContext(ctx)
	utilruntime.Must(natsscheme.AddToScheme(scheme.Scheme))

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(0)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cmp.Or(o.EventClient, kubeClient).CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nats-operator"})

	RegisterWorkqueueMetrics(metrics)
	src := SourcesFor(inf, kubeClient, o.Dynamic)
	c := &Controller{
		kubeClient:          kubeClient,
		natsClient:          natsClient,
		gatherer:            gatherer{src: src, systemUsers: &systemUserCache{}, deletions: &podDeletions{}, minted: &mintedUsers{lifetime: cmp.Or(o.SystemUserLifetime, DefaultSystemUserLifetime)}},
		api:                 src.API.(*apiReader),
		ownWrites:           newOwnWrites(),
		catchUps:            newCatchUps(),
		dynamic:             o.Dynamic,
		controllerNamespace: o.ControllerNamespace,
		leaseNamespace:      cmp.Or(o.LeaseNamespace, DefaultControllerNamespace),
		reloadTimeout:       cmp.Or(o.ReloadTimeout, DefaultReloadTimeout),
		restRequeue:         cmp.Or(o.RestRequeue, DefaultRestRequeue),
		pauseBeforeStep:     o.PauseBeforeStep,
		podTemplatePolicy:   o.PodTemplatePolicy,
		reloadSends:         pacer{first: reloadFirstResend},
		synced: []cache.InformerSynced{
			inf.Clusters.Informer().HasSynced, inf.OperatorTrusts.Informer().HasSynced,
			inf.AccountTrusts.Informer().HasSynced, inf.StatefulSets.Informer().HasSynced,
			inf.ConfigMaps.Informer().HasSynced, inf.Services.Informer().HasSynced,
			inf.Pods.Informer().HasSynced, inf.PDBs.Informer().HasSynced,
			inf.Secrets.Informer().HasSynced, inf.NetworkPolicies.Informer().HasSynced,
			inf.Backups.Informer().HasSynced, inf.Restores.Informer().HasSynced,
		},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: QueueName},
		),
		recorder: recorder,
		metrics:  metrics,
		observer: observe.New(observe.Options{Name: "nats-operator"}),
		ready:    make(chan struct{}),
	}
	c.health = NewWorkerHealth(cmp.Or(o.WorkerStallTimeout, DefaultWorkerStallTimeout), c.queue.Len)

	logger.V(4).Info("Setting up event handlers")
	handle := func(informer cache.SharedIndexInformer, fn func(obj interface{})) {
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    fn,
			UpdateFunc: func(_, obj interface{}) { fn(obj) },
			DeleteFunc: fn,
		})
		utilruntime.Must(err)
	}
	handle(inf.Clusters.Informer(), c.enqueueCluster)
	// A NatsCluster created, deleted or given another consent: the clusters
	// naming it by clusterRef (gatherReferenceConsent).
	_, err := inf.Clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueClusterRefReferrers,
		UpdateFunc: func(old, obj interface{}) {
			if consentChanged(old, obj) {
				c.enqueueClusterRefReferrers(obj)
			}
		},
		DeleteFunc: c.enqueueClusterRefReferrers,
	})
	utilruntime.Must(err)
	for _, informer := range []cache.SharedIndexInformer{
		inf.StatefulSets.Informer(), inf.ConfigMaps.Informer(), inf.Services.Informer(),
		inf.PDBs.Informer(), inf.NetworkPolicies.Informer(),
		// The NatsBackup and NatsRestore of a JetStream migration.
		inf.Backups.Informer(), inf.Restores.Informer(),
	} {
		handle(informer, c.enqueueOwner)
	}
	// A pod's controller is its StatefulSet, not the NatsCluster.
	handle(inf.Pods.Informer(), c.enqueuePodsCluster)
	handle(inf.OperatorTrusts.Informer(), c.enqueueReferrers)
	handle(inf.AccountTrusts.Informer(), c.enqueueReferrers)
	handle(inf.Secrets.Informer(), func(obj interface{}) {
		c.enqueueReferrers(obj)
		c.enqueueOwner(obj) // the system user Secret
		c.enqueueGatewayReferrers(obj)
	})
	if _, err := inf.Secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.api.secrets.forget}); err != nil {
		utilruntime.Must(err)
	}
	return c
}

// Ready is closed once every informer cache has synced.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// Healthy returns why the workers are wedged (WorkerHealth), or nil.
func (c *Controller) Healthy(now time.Time) error { return c.health.Check(now) }

// WaitForCacheSync blocks until the caches have synced or ctx ends; it
// reports whether they synced.
func (c *Controller) WaitForCacheSync(ctx context.Context) bool {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return false
	}
	c.cachesSynced.Do(func() { close(c.ready) })
	return true
}

// Run waits for the caches, starts workers and blocks until ctx ends; then it
// shuts the queue down and waits for in-flight syncs to finish (drain).
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)

	logger.Info("Waiting for informer caches to sync")
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("failed to wait for caches to sync")
	}
	logger.Info("Starting workers", "count", workers)
	c.health.WorkersStarted(time.Now())
	defer c.health.WorkersStopped()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.runWorker, time.Second)
		}()
	}
	<-ctx.Done()
	logger.Info("Shutting down workers, draining the queue")
	c.queue.ShutDownWithDrain()
	wg.Wait()
	c.finishing.Wait()
	c.observer.Close()
	logger.Info("Workers stopped")
	return nil
}

// DrainTimeout is how long a sync in flight when the controller is told to
// stop (SIGTERM, lost leadership) may go on, so that the step it is taking
// (a ConfigMap and its StatefulSet, a pod deleted after its template
// changed) is finished, not cut in half; within the Deployment's
// terminationGracePeriodSeconds (60).
const DrainTimeout = 30 * time.Second

// drainContext is the context of one sync: not cancelled when parent is,
// but timeout after it; its values (the logger) are parent's.
func drainContext(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var timer *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(parent, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(timeout, cancel)
	})
	return ctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	start := time.Now()
	token := c.health.SyncStarted(start)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "natscluster", key.String())
	syncCtx, cancel := drainContext(klog.NewContext(ctx, logger), DrainTimeout)
	end := func(requeueAfter time.Duration, err error) {
		cancel()
		logger.V(4).Info("Finished syncing", "duration", time.Since(start))
		c.health.SyncFinished(token, time.Now())
		c.requeue(ctx, key, requeueAfter, err)
		c.queue.Done(key)
	}
	finish, requeueAfter, err := c.prepare(syncCtx, key)
	if finish == nil {
		end(requeueAfter, err)
		return true
	}
	// The writes and the report go on without the worker, which takes the
	// next NatsCluster: a step's writes are a few API requests in a row,
	// and a fleet whose clusters all step at once would otherwise start
	// its last cluster's rollout only after every other cluster's writes
	// (issue 37: 4 workers, 100 clusters, 33 s). The key is Done only when
	// they are, so the queue still never hands one NatsCluster to two
	// syncs at once, and a shutdown's drain (ShutDownWithDrain) waits for
	// them.
	c.finishing.Add(1)
	go func() {
		defer c.finishing.Done()
		defer utilruntime.HandleCrash()
		end(finish(syncCtx))
	}()
	return true
}

// requeue puts key back as a sync's outcome says: rate limited after an
// error, after requeueAfter, or not at all.
func (c *Controller) requeue(ctx context.Context, key cache.ObjectName, requeueAfter time.Duration, err error) {
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "objectReference", key)
		c.queue.AddRateLimited(key)
	case requeueAfter > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeueAfter)
	default:
		c.queue.Forget(key)
	}
}

func (c *Controller) enqueueCluster(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.Must(err)
		return
	}
	c.queue.Add(o)
}

// enqueueOwner enqueues the NatsCluster that controls obj, resolved by Kind
// and checked by UID against the cache.
func (c *Controller) enqueueOwner(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if nc := c.resolveControllerRef(o.GetNamespace(), metav1.GetControllerOf(o)); nc != nil {
		c.queue.Add(cache.MetaObjectToName(nc))
	}
}

// enqueuePodsCluster enqueues the NatsCluster of a server's pod: a pod
// that becomes Ready, fails its probe, restarts or goes is seen at once,
// not at the next requeue. The pod is the cluster's by its cluster label
// and a StatefulSet controller; a pod that only pretends costs one sync.
func (c *Controller) enqueuePodsCluster(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	name := pod.GetLabels()[clusterv1beta1.LabelCluster]
	if ref := metav1.GetControllerOf(pod); name == "" || ref == nil || ref.Kind != "StatefulSet" {
		return
	}
	if nc, err := c.gatherer.gatherCluster(pod.GetNamespace(), name); err == nil {
		c.queue.Add(cache.MetaObjectToName(nc))
	}
}

// resolveControllerRef returns the NatsCluster a controller reference points
// to, or nil when the reference is of another kind or the UID differs (the
// owner was deleted and recreated under the same name).
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *clusterv1beta1.NatsCluster {
	if ref == nil || ref.Kind != "NatsCluster" || ref.APIVersion != clusterv1beta1.SchemeGroupVersion.String() {
		return nil
	}
	nc, err := c.gatherer.gatherCluster(namespace, ref.Name)
	if err != nil || nc.UID != ref.UID {
		return nil
	}
	return nc
}

// enqueueReferrers enqueues every NatsCluster in obj's namespace that names
// obj (a NatsOperatorTrust, NatsAccountTrust or credentials Secret), so a
// cluster held on a missing or invalid reference moves once it is fixed.
func (c *Controller) enqueueReferrers(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	ncs, err := c.gatherer.src.Clusters.NatsClusters(o.GetNamespace()).List(everything)
	if err != nil {
		return
	}
	for _, nc := range ncs {
		if refersTo(nc, obj, o.GetName()) {
			c.queue.Add(cache.MetaObjectToName(nc))
		}
	}
}

// enqueueGatewayReferrers enqueues, for a Secret, every NatsCluster with
// spec.gateway.tls and a gateway remote by clusterRef in the Secret's
// namespace, or a leaf remote with tls by clusterRef there: the remote's
// routes CA is in its gateway CA bundle (gatherGatewayTLS) or its leaf CA
// (gatherLeafCredentials). Every such Secret event of that namespace enqueues
// them; the sync finds whether the bundle changed.
func (c *Controller) enqueueGatewayReferrers(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	ncs, err := c.gatherer.src.Clusters.List(everything)
	if err != nil {
		return
	}
	in := func(nc *clusterv1beta1.NatsCluster, ref *clusterv1beta1.NatsClusterReference) bool {
		return ref != nil && cmp.Or(ref.Namespace, nc.Namespace) == o.GetNamespace()
	}
	for _, nc := range ncs {
		g, l := nc.Spec.Gateway, nc.Spec.LeafNodes
		if (g.TLSOn() && slices.ContainsFunc(g.Remotes, func(r clusterv1beta1.GatewayRemote) bool { return in(nc, r.ClusterRef) })) ||
			(l != nil && slices.ContainsFunc(l.Remotes, func(r clusterv1beta1.LeafNodeRemote) bool { return r.TLS != nil && in(nc, r.ClusterRef) })) {
			c.queue.Add(cache.MetaObjectToName(nc))
		}
	}
}

// isSecret reports whether obj is a Secret: a whole one, or its metadata
// as the Secrets informer holds it (secrets.go; the only metadata-only
// informer, whose items carry no Secret kind).
func isSecret(obj interface{}) bool {
	switch obj.(type) {
	case *corev1.Secret, *metav1.PartialObjectMetadata:
		return true
	}
	return false
}

// refersTo reports whether nc's spec.auth, spec.routes.tls, spec.tls or spec.leafnodes.remotes names
// the object.
func refersTo(nc *clusterv1beta1.NatsCluster, obj interface{}, name string) bool {
	if isSecret(obj) {
		if t := nc.Spec.Routes.TLS; t != nil && t.Secret != nil && t.Secret.Name == name {
			return true
		}
		if t := nc.Spec.TLS; t != nil && t.Secret != nil && t.Secret.Name == name {
			return true
		}
		if g := nc.Spec.Gateway; g != nil && g.TLS != nil && g.TLS.CASecret != nil && g.TLS.CASecret.Name == name {
			return true
		}
		if l := nc.Spec.LeafNodes; l != nil && slices.ContainsFunc(l.Remotes, func(r clusterv1beta1.LeafNodeRemote) bool {
			return (r.Credentials != nil && r.Credentials.Name == name) || (r.TLS != nil && r.TLS.CASecret != nil && r.TLS.CASecret.Name == name)
		}) {
			return true
		}
		if t := nc.Spec.TLS; t != nil && t.Certificate != nil && clientTLSName(nc) == name {
			return true
		}
	}
	a := nc.Spec.Auth
	if a == nil {
		return false
	}
	if isSecret(obj) {
		return a.SystemCredentials != nil && a.SystemCredentials.SecretKeyRef.Name == name
	}
	switch obj.(type) {
	case *trustv1beta1.NatsOperatorTrust:
		return a.TrustRef.Name == name
	case *trustv1beta1.NatsAccountTrust:
		for _, r := range a.AccountTrustRefs {
			if r.Name == name {
				return true
			}
		}
	}
	return false
}
