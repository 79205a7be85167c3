package controller

// The Gatherer: the only code of a sync that reads the listers. The state
// machine it feeds:
//
//	gather ──(reference missing/invalid)──> hold: TrustNotFound, CredentialsNotFound, ...
//	   │                                     (observe only, no server touched)
//	   ▼
//	render ──(trust invalid)──────────────> hold: TrustInvalid, AccountTrustInvalid
//	   │
//	   ▼
//	create missing objects ──(name taken)─> hold: ReconcileFailed
//	   │
//	   ▼
//	observe ─> plan ─> at most one step ─> status

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// referenceError is a reference of spec.auth that cannot be resolved. It
// becomes Progressing=False with Reason; no server is touched.
type referenceError struct {
	reason, message string
}

func (e *referenceError) Error() string { return e.message }

// serverObjects are one server's objects as the caches hold them; nil when
// absent.
type serverObjects struct {
	name        string
	ordinal     int32
	statefulSet *appsv1.StatefulSet
	configMap   *corev1.ConfigMap
	pod         *corev1.Pod
}

// clusterState is what one sync reads.
type clusterState struct {
	nc *clusterv1beta1.NatsCluster
	// trust is nil without spec.auth.
	trust *render.Trust
	// systemCreds is the creds file of spec.auth.systemCredentials.
	systemCreds []byte
	// servers in ordinal order, one per spec.replicas.
	servers []serverObjects
}

// gather reads the cluster's references and objects. A reference that cannot
// be resolved is a *referenceError; the servers are gathered regardless, so
// the cluster stays observed.
func (c *Controller) gather(nc *clusterv1beta1.NatsCluster) (*clusterState, error) {
	st := &clusterState{nc: nc}
	for i := range nc.Spec.Replicas {
		so := serverObjects{name: render.ServerName(nc.Name, i), ordinal: i}
		if sts, err := c.statefulSets.StatefulSets(nc.Namespace).Get(render.StatefulSetName(nc.Name, i)); err == nil {
			if !metav1.IsControlledBy(sts, nc) {
				return st, &notControlledError{"StatefulSet", sts.Namespace, sts.Name}
			}
			so.statefulSet = sts
		} else if !apierrors.IsNotFound(err) {
			return st, err
		}
		if cm, err := c.configMaps.ConfigMaps(nc.Namespace).Get(render.ConfigMapName(nc.Name, i)); err == nil {
			if !metav1.IsControlledBy(cm, nc) {
				return st, &notControlledError{"ConfigMap", cm.Namespace, cm.Name}
			}
			so.configMap = cm
		} else if !apierrors.IsNotFound(err) {
			return st, err
		}
		if pod, err := c.pods.Pods(nc.Namespace).Get(render.PodName(nc.Name, i)); err == nil {
			if so.statefulSet != nil && metav1.IsControlledBy(pod, so.statefulSet) {
				so.pod = pod
			}
		} else if !apierrors.IsNotFound(err) {
			return st, err
		}
		st.servers = append(st.servers, so)
	}
	return st, c.gatherAuth(st)
}

func (c *Controller) gatherAuth(st *clusterState) error {
	nc := st.nc
	auth := nc.Spec.Auth
	if auth == nil {
		return nil
	}
	ot, err := c.operatorTrusts.NatsOperatorTrusts(nc.Namespace).Get(auth.TrustRef.Name)
	if apierrors.IsNotFound(err) {
		return &referenceError{clusterv1beta1.ReasonTrustNotFound, fmt.Sprintf(
			"NatsOperatorTrust %s/%s named by spec.auth.trustRef does not exist: create it or fix the reference; no server was changed",
			nc.Namespace, auth.TrustRef.Name)}
	}
	if err != nil {
		return err
	}
	trust := &render.Trust{OperatorJWT: ot.Spec.OperatorJWT, SystemAccountJWT: ot.Spec.SystemAccountJWT}
	for _, ref := range auth.AccountTrustRefs {
		at, err := c.accountTrusts.NatsAccountTrusts(nc.Namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return &referenceError{clusterv1beta1.ReasonAccountTrustNotFound, fmt.Sprintf(
				"NatsAccountTrust %s/%s named by spec.auth.accountTrustRefs does not exist: create it or remove the reference; no server was changed",
				nc.Namespace, ref.Name)}
		}
		if err != nil {
			return err
		}
		trust.Accounts = append(trust.Accounts, render.AccountTrust{Name: at.Name, PublicKey: at.Spec.PublicKey, JWT: at.Spec.JWT})
	}
	if sc := auth.SystemCredentials; sc != nil {
		key := sc.SecretKeyRef.Key
		if key == "" {
			key = "user.creds"
		}
		secret, err := c.secrets.Secrets(nc.Namespace).Get(sc.SecretKeyRef.Name)
		if apierrors.IsNotFound(err) {
			return &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
				"Secret %s/%s named by spec.auth.systemCredentials does not exist: create it with the creds file of a system account user under key %q; no server was changed",
				nc.Namespace, sc.SecretKeyRef.Name, key)}
		}
		if err != nil {
			return err
		}
		creds, ok := secret.Data[key]
		if !ok || len(creds) == 0 {
			return &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
				"Secret %s/%s named by spec.auth.systemCredentials has no key %q: add the creds file of a system account user under it; no server was changed",
				nc.Namespace, sc.SecretKeyRef.Name, key)}
		}
		st.systemCreds = creds
	}
	st.trust = trust
	return nil
}
