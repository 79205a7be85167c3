package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/nats-operator/nats-operator/internal/nsinformers"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
)

// ParseNamespaces reads a --namespace value: empty is every namespace
// ([""]), otherwise a comma-separated list.
func ParseNamespaces(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, ns := range strings.Split(s, ",") {
		ns = strings.TrimSpace(ns)
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	if len(out) == 0 {
		return []string{""}
	}
	return out
}

// InformerSet is every informer the controller reads from, for all
// namespaces, one, or a list (each listed and watched in its own
// namespace, so Roles there are enough): cmd/nats-operator and kubectl nats
// build the same.
type InformerSet struct {
	Informers
	// Backups are the informers of the NatsBackup and NatsRestore
	// controller (pkg/controller/backups); started only once it asks for
	// them.
	Backups  BackupInformers
	start    func(stop <-chan struct{})
	shutdown func()
}

// BackupInformers are what the NatsBackup and NatsRestore controller
// reads besides Informers: the Jobs and CronJobs it makes (labelled
// managed-by, as every object the controller makes).
type BackupInformers struct {
	Jobs     batchinformers.JobInformer
	CronJobs batchinformers.CronJobInformer
}

// Start starts every informer; they stop when stop is closed or at
// Shutdown.
func (s *InformerSet) Start(stop <-chan struct{}) { s.start(stop) }

// Shutdown stops the informers and waits for them.
func (s *InformerSet) Shutdown() { s.shutdown() }

// WaitForCacheSync waits until every cache is filled, or ctx ends.
func (s *InformerSet) WaitForCacheSync(ctx context.Context) error {
	for name, inf := range s.all() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("reading %s: the cache did not fill: %w", name, context.Cause(ctx))
		}
	}
	return nil
}

func (s *InformerSet) all() map[string]cache.SharedIndexInformer {
	return map[string]cache.SharedIndexInformer{
		"NatsClusters": s.Clusters.Informer(), "NatsOperatorTrusts": s.OperatorTrusts.Informer(),
		"NatsAccountTrusts": s.AccountTrusts.Informer(), "StatefulSets": s.StatefulSets.Informer(),
		"ConfigMaps": s.ConfigMaps.Informer(), "Services": s.Services.Informer(), "Pods": s.Pods.Informer(),
		"PodDisruptionBudgets": s.PDBs.Informer(), "Secrets": s.Secrets.Informer(),
		"NetworkPolicies": s.NetworkPolicies.Informer(),
	}
}

// NewInformerSet builds the informers of namespaces (ParseNamespaces).
func NewInformerSet(kubeClient kubernetes.Interface, natsClient versioned.Interface, metaClient metadata.Interface, namespaces []string, resync time.Duration) (*InformerSet, error) {
	factoryNS := ""
	if len(namespaces) == 1 {
		factoryNS = namespaces[0]
	}
	// Objects the controller makes carry the managed-by label; the caches
	// hold only those. Secrets and the trust kinds are the user's.
	managed := labels.SelectorFromSet(labels.Set{clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue}).String()
	tweak := func(lo *metav1.ListOptions) { lo.LabelSelector = managed }
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(factoryNS), kubeinformers.WithTweakListOptions(tweak))
	natsFactory := natsinformers.NewSharedInformerFactoryWithOptions(natsClient, resync, natsinformers.WithNamespace(factoryNS))

	// Secrets are the user's: the controller caches their metadata only
	// (no values, no annotations) and reads the ones its clusters name by
	// name (pkg/controller/gather_secrets.go).
	secretsLW := nsinformers.ListerWatcher(namespaces, func(ns string) cache.ListerWatcher {
		res := metaClient.Resource(SecretsResource).Namespace(ns)
		return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return res.Watch(ctx, o)
			},
		}, metaClient)
	})
	secrets := newGenericInformer(cache.NewSharedIndexInformer(secretsLW, &metav1.PartialObjectMetadata{}, resync, namespaceIndex()))
	if err := secrets.Informer().SetTransform(StripSecretMetadata); err != nil {
		return nil, err
	}

	if len(namespaces) > 1 {
		// Every informer the factories hand out is registered here first,
		// over the listed namespaces; none may fall back to the factory's
		// own, which would list every namespace.
		none := func(*metav1.ListOptions) {}
		for _, k := range []struct {
			obj      runtime.Object
			client   cache.Getter
			resource string
		}{
			{&appsv1.StatefulSet{}, kubeClient.AppsV1().RESTClient(), "statefulsets"},
			{&corev1.ConfigMap{}, kubeClient.CoreV1().RESTClient(), "configmaps"},
			{&corev1.Service{}, kubeClient.CoreV1().RESTClient(), "services"},
			{&corev1.Pod{}, kubeClient.CoreV1().RESTClient(), "pods"},
			{&policyv1.PodDisruptionBudget{}, kubeClient.PolicyV1().RESTClient(), "poddisruptionbudgets"},
			{&networkingv1.NetworkPolicy{}, kubeClient.NetworkingV1().RESTClient(), "networkpolicies"},
			{&batchv1.Job{}, kubeClient.BatchV1().RESTClient(), "jobs"},
			{&batchv1.CronJob{}, kubeClient.BatchV1().RESTClient(), "cronjobs"},
		} {
			kubeFactory.InformerFor(k.obj, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
				return namespacesInformer(namespaces, k.obj, resync, k.client, k.resource, tweak)
			})
		}
		for _, k := range []struct {
			obj      runtime.Object
			client   cache.Getter
			resource string
		}{
			{&clusterv1beta1.NatsCluster{}, natsClient.ClusterV1beta1().RESTClient(), "natsclusters"},
			{&trustv1beta1.NatsOperatorTrust{}, natsClient.TrustV1beta1().RESTClient(), "natsoperatortrusts"},
			{&trustv1beta1.NatsAccountTrust{}, natsClient.TrustV1beta1().RESTClient(), "natsaccounttrusts"},
			{&clusterv1beta1.NatsBackup{}, natsClient.ClusterV1beta1().RESTClient(), "natsbackups"},
			{&clusterv1beta1.NatsRestore{}, natsClient.ClusterV1beta1().RESTClient(), "natsrestores"},
		} {
			natsFactory.InformerFor(k.obj, func(versioned.Interface, time.Duration) cache.SharedIndexInformer {
				return namespacesInformer(namespaces, k.obj, resync, k.client, k.resource, none)
			})
		}
	}

	set := &InformerSet{Informers: Informers{
		Clusters:        natsFactory.Cluster().V1beta1().NatsClusters(),
		OperatorTrusts:  natsFactory.Trust().V1beta1().NatsOperatorTrusts(),
		AccountTrusts:   natsFactory.Trust().V1beta1().NatsAccountTrusts(),
		StatefulSets:    kubeFactory.Apps().V1().StatefulSets(),
		ConfigMaps:      kubeFactory.Core().V1().ConfigMaps(),
		Services:        kubeFactory.Core().V1().Services(),
		Pods:            kubeFactory.Core().V1().Pods(),
		PDBs:            kubeFactory.Policy().V1().PodDisruptionBudgets(),
		Secrets:         secrets,
		NetworkPolicies: kubeFactory.Networking().V1().NetworkPolicies(),
		Backups:         natsFactory.Cluster().V1beta1().NatsBackups(),
		Restores:        natsFactory.Cluster().V1beta1().NatsRestores(),
	}, Backups: BackupInformers{
		Jobs:     kubeFactory.Batch().V1().Jobs(),
		CronJobs: kubeFactory.Batch().V1().CronJobs(),
	}}
	secretsStop := make(chan struct{})
	set.start = func(stop <-chan struct{}) {
		kubeFactory.Start(stop)
		natsFactory.Start(stop)
		go secrets.Informer().RunWithContext(contextOf(stop, secretsStop))
	}
	var once sync.Once
	set.shutdown = func() {
		once.Do(func() {
			close(secretsStop)
			kubeFactory.Shutdown()
			natsFactory.Shutdown()
		})
	}
	return set, nil
}

func namespaceIndex() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// namespacesInformer is an informer of obj over namespaces.
func namespacesInformer(namespaces []string, obj runtime.Object, resync time.Duration, client cache.Getter, resource string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	lw := nsinformers.ListerWatcher(namespaces, func(ns string) cache.ListerWatcher {
		return cache.NewFilteredListWatchFromClient(client, resource, ns, tweak)
	})
	return cache.NewSharedIndexInformer(lw, obj, resync, namespaceIndex())
}

// contextOf is a context done when either channel is closed.
func contextOf(a, b <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		select {
		case <-a:
		case <-b:
		}
	}()
	return ctx
}

// genericInformer is a metadata informer as metadatainformer.ForResource
// returns one.
type genericInformer struct{ inf cache.SharedIndexInformer }

func newGenericInformer(inf cache.SharedIndexInformer) genericInformer { return genericInformer{inf} }

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.inf }
func (g genericInformer) Lister() cache.GenericLister {
	return cache.NewGenericLister(g.inf.GetIndexer(), SecretsResource.GroupResource())
}
