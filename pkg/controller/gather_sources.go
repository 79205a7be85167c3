package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"

	clusterlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/cluster/v1beta1"
	trustlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/trust/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// Sources are every read a sync makes, and the only way it reads: the
// listers over the shared informers' caches, and API for the few objects
// read by name from the API server. Only the gatherer (the gather*.go
// files) touches them (TestOnlyTheGathererReads); kubectl nats plan
// gathers through the same, from a live cluster (SourcesFor) or from
// manifests (StaticSources).
type Sources struct {
	Clusters        clusterlisters.NatsClusterLister
	OperatorTrusts  trustlisters.NatsOperatorTrustLister
	AccountTrusts   trustlisters.NatsAccountTrustLister
	StatefulSets    appslisters.StatefulSetLister
	ConfigMaps      corelisters.ConfigMapLister
	Services        corelisters.ServiceLister
	Pods            corelisters.PodLister
	PDBs            policylisters.PodDisruptionBudgetLister
	NetworkPolicies networkinglisters.NetworkPolicyLister
	// Backups and Restores hold the NatsBackups and NatsRestores of a
	// JetStream migration (gatherMigration).
	Backups  clusterlisters.NatsBackupLister
	Restores clusterlisters.NatsRestoreLister
	// API reads by name what the caches hold no values of (Secrets) or do
	// not watch.
	API APIReader
}

// APIReader reads single objects by name. A missing object is a NotFound
// error. The gatherer reads each at most once per sync, and only those the
// sync needs (see gatherClaims), so a cluster at rest reads none but the
// Secrets it names, whose values are cached by resourceVersion.
type APIReader interface {
	// Secret is a Secret with its values (the caches hold metadata only).
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// Claim is a server's PersistentVolumeClaim.
	Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// StorageClass says whether a claim can grow in place.
	StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error)
	// Certificate is a cert-manager Certificate; ErrNoCertManager when
	// there is no client for cert-manager.
	Certificate(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error)
	// PodMonitor is a prometheus-operator PodMonitor; served is false
	// (and pm nil) when the API server does not serve the kind or there is
	// no client for it.
	PodMonitor(ctx context.Context, namespace, name string) (pm *unstructured.Unstructured, served bool, err error)
}

// ErrNoCertManager: the controller was given no client for cert-manager's
// Certificates (Options.Dynamic).
var ErrNoCertManager = errors.New("this controller has no client for cert-manager")

var certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

var podMonitors = schema.GroupVersionResource{Group: render.PodMonitorGroup, Version: render.PodMonitorVersion, Resource: render.PodMonitorResource}

// SourcesFor are the Sources of a controller on inf, reading by name with
// kube (Secret values through a cache keyed by the metadata informer's
// resourceVersion) and dyn (Certificates, PodMonitors; nil without).
func SourcesFor(inf Informers, kube kubernetes.Interface, dyn dynamic.Interface) Sources {
	return Sources{
		Clusters:        inf.Clusters.Lister(),
		OperatorTrusts:  inf.OperatorTrusts.Lister(),
		AccountTrusts:   inf.AccountTrusts.Lister(),
		StatefulSets:    inf.StatefulSets.Lister(),
		ConfigMaps:      inf.ConfigMaps.Lister(),
		Services:        inf.Services.Lister(),
		Pods:            inf.Pods.Lister(),
		PDBs:            inf.PDBs.Lister(),
		NetworkPolicies: inf.NetworkPolicies.Lister(),
		Backups:         inf.Backups.Lister(),
		Restores:        inf.Restores.Lister(),
		API:             &apiReader{kube: kube, dynamic: dyn, secrets: newSecretReader(kube, inf.Secrets.Lister())},
	}
}

// apiReader is the controller's APIReader: GETs on the API server.
type apiReader struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	secrets *secretReader
	// podMonitorAPI remembers whether PodMonitors are served.
	podMonitorAPI podMonitorAPI
}

func (r *apiReader) Secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	return r.secrets.Secrets(namespace).Get(name)
}

func (r *apiReader) Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return r.kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r *apiReader) StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	return r.kube.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
}

func (r *apiReader) Certificate(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	if r.dynamic == nil {
		return nil, ErrNoCertManager
	}
	return r.dynamic.Resource(certificates).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r *apiReader) PodMonitor(ctx context.Context, namespace, name string) (*unstructured.Unstructured, bool, error) {
	if r.dynamic == nil {
		return nil, false, nil
	}
	served, err := r.podMonitorsServed()
	if err != nil || !served {
		return nil, false, err
	}
	pm, err := r.dynamic.Resource(podMonitors).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return pm, err == nil, err
}

// podMonitorAPI caches whether the API server serves PodMonitors: asked
// again at most every podMonitorRecheck, so installing prometheus-operator
// after the controller is noticed within a minute.
type podMonitorAPI struct {
	mu      sync.Mutex
	checked time.Time
	served  bool
}

const podMonitorRecheck = time.Minute

// podMonitorsServed asks discovery whether PodMonitors are served.
func (r *apiReader) podMonitorsServed() (bool, error) {
	p := &r.podMonitorAPI
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked.IsZero() && time.Since(p.checked) < podMonitorRecheck {
		return p.served, nil
	}
	list, err := r.kube.Discovery().ServerResourcesForGroupVersion(podMonitors.GroupVersion().String())
	served := false
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, err
	default:
		for _, res := range list.APIResources {
			served = served || res.Name == podMonitors.Resource
		}
	}
	p.checked, p.served = time.Now(), served
	return served, nil
}
