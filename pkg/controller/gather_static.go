package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	clusterlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/cluster/v1beta1"
	trustlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/trust/v1beta1"
)

// StaticSources are Sources holding objs and nothing else: the listers of
// client-go over indexers filled with them (no informer, no client), and
// reads by name from them. kubectl nats plan gathers from them offline,
// from manifests. There is no cert-manager (ErrNoCertManager) and no
// PodMonitor API. An object of a kind a sync does not read is an error.
func StaticSources(objs ...runtime.Object) (Sources, error) {
	newIndexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	var (
		clusters, operatorTrusts, accountTrusts = newIndexer(), newIndexer(), newIndexer()
		statefulSets, configMaps, services      = newIndexer(), newIndexer(), newIndexer()
		pods, pdbs, networkPolicies             = newIndexer(), newIndexer(), newIndexer()
		backups, restores                       = newIndexer(), newIndexer()
	)
	api := &staticAPI{secrets: map[string]*corev1.Secret{}, claims: map[string]*corev1.PersistentVolumeClaim{}, classes: map[string]*storagev1.StorageClass{}}
	for _, o := range objs {
		var idx cache.Indexer
		switch o := o.(type) {
		case *clusterv1beta1.NatsCluster:
			idx = clusters
		case *trustv1beta1.NatsOperatorTrust:
			idx = operatorTrusts
		case *trustv1beta1.NatsAccountTrust:
			idx = accountTrusts
		case *appsv1.StatefulSet:
			idx = statefulSets
		case *corev1.ConfigMap:
			idx = configMaps
		case *corev1.Service:
			idx = services
		case *corev1.Pod:
			idx = pods
		case *policyv1.PodDisruptionBudget:
			idx = pdbs
		case *networkingv1.NetworkPolicy:
			idx = networkPolicies
		case *clusterv1beta1.NatsBackup:
			idx = backups
		case *clusterv1beta1.NatsRestore:
			idx = restores
		case *corev1.Secret:
			api.secrets[o.Namespace+"/"+o.Name] = o
			continue
		case *corev1.PersistentVolumeClaim:
			api.claims[o.Namespace+"/"+o.Name] = o
			continue
		case *storagev1.StorageClass:
			api.classes[o.Name] = o
			continue
		default:
			return Sources{}, fmt.Errorf("static sources: a sync reads no %T", o)
		}
		if err := idx.Add(o); err != nil {
			return Sources{}, err
		}
	}
	return Sources{
		Clusters:        clusterlisters.NewNatsClusterLister(clusters),
		OperatorTrusts:  trustlisters.NewNatsOperatorTrustLister(operatorTrusts),
		AccountTrusts:   trustlisters.NewNatsAccountTrustLister(accountTrusts),
		StatefulSets:    appslisters.NewStatefulSetLister(statefulSets),
		ConfigMaps:      corelisters.NewConfigMapLister(configMaps),
		Services:        corelisters.NewServiceLister(services),
		Pods:            corelisters.NewPodLister(pods),
		PDBs:            policylisters.NewPodDisruptionBudgetLister(pdbs),
		NetworkPolicies: networkinglisters.NewNetworkPolicyLister(networkPolicies),
		Backups:         clusterlisters.NewNatsBackupLister(backups),
		Restores:        clusterlisters.NewNatsRestoreLister(restores),
		API:             api,
	}, nil
}

// staticAPI reads by name from the objects StaticSources was given.
type staticAPI struct {
	secrets map[string]*corev1.Secret
	claims  map[string]*corev1.PersistentVolumeClaim
	classes map[string]*storagev1.StorageClass
}

func (a *staticAPI) Secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	if s, ok := a.secrets[namespace+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (a *staticAPI) Claim(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := a.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
}

func (a *staticAPI) StorageClass(_ context.Context, name string) (*storagev1.StorageClass, error) {
	if c, ok := a.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: storagev1.GroupName, Resource: "storageclasses"}, name)
}

func (a *staticAPI) Certificate(context.Context, string, string) (*unstructured.Unstructured, error) {
	return nil, ErrNoCertManager
}

func (a *staticAPI) PodMonitor(context.Context, string, string) (*unstructured.Unstructured, bool, error) {
	return nil, false, nil
}
