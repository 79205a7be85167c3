package controller

// The gatherer: the only code of a sync that reads the listers. A sync runs
// in three phases, and only the first reads anything:
//
//	decide: gather (every object of the cluster, StatefulSets beyond
//	        spec.replicas included; the references of spec.auth) ─> render
//	        (with the servers' existing objects, see render.Input.Running)
//	        ─> observe ─> plan
//	write:  the finalizer (FinalizerStreams) when missing; the Services and
//	        PDB; then only what the Decision allows: the servers in
//	        Decision.Create, Decision.Step, Decision.ClearAnnotations. While
//	        the NatsCluster is being deleted, nothing but removing the
//	        finalizer when Decision.ReleaseFinalizer says so (then no status)
//	report: status (observed, then the Decision's Progressing and rollout),
//	        Events, metrics: always the Decision's, or, when a write was
//	        refused, ReconcileFailed with the API server's words
//
// A reference that does not resolve, a trust or spec render refuses, or an
// object in the way becomes rollout.Input.Blocked: the planner holds with its
// reason and no server is created or touched.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
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
	// extra are the servers beyond spec.replicas that still have a
	// StatefulSet, in ordinal order.
	extra []serverObjects
	// shared are the Services and the PDB.
	shared sharedObjects
	// systemUser is the controller's system user of a cluster without auth,
	// from its Secret or chosen by this sync (then newSystemUserSecret is
	// the Secret to create); nil when none is rendered.
	systemUser          *systemUser
	newSystemUserSecret *corev1.Secret
	// tls are the routes' and clients' certificates to render; tlsCA the
	// PEM CA the client certificate chains to (for the controller's own
	// connections), nil without client TLS.
	tls   render.TLS
	tlsCA []byte
	// tlsSecrets are generated route TLS Secrets to create or update
	// before anything else is written.
	tlsSecrets []*corev1.Secret
	// certificate is the client Certificate to create or update.
	certificate *unstructured.Unstructured
	// reloadVia is the $SYS target reloads are sent through.
	reloadVia observe.Target
	// blocked is why the target cannot be computed or acted on (a reference
	// that does not resolve, an object in the way); nil when it can.
	blocked *rollout.Blocked
}

// gather reads the cluster's references and objects. A reference that cannot
// be resolved, or an object in the way, is recorded in blocked; the servers
// are gathered regardless, so the cluster stays observed. The error is one to
// retry (a lister failing).
func (c *Controller) gather(nc *clusterv1beta1.NatsCluster) (*clusterState, error) {
	st := &clusterState{nc: nc}
	var err error
	if st.shared, err = c.gatherShared(nc); err != nil {
		return nil, err
	}
	err = c.gatherServers(st)
	if err == nil {
		err = c.gatherAuth(st)
	}
	if err == nil {
		err = c.gatherSystemUser(st)
	}
	if err == nil {
		err = c.gatherTLS(st, time.Now())
	}
	var refErr *referenceError
	var nce *notControlledError
	switch {
	case errors.As(err, &refErr):
		st.blocked = &rollout.Blocked{Reason: refErr.reason, Message: refErr.message}
	case errors.As(err, &nce):
		st.blocked = &rollout.Blocked{Reason: clusterv1beta1.ReasonReconcileFailed, Message: nce.Error()}
	case err != nil:
		return nil, err
	}
	return st, nil
}

// gatherServers reads the objects of every server of the spec, and of every
// server beyond it that still has a StatefulSet the cluster controls.
func (c *Controller) gatherServers(st *clusterState) error {
	nc := st.nc
	for i := range nc.Spec.Replicas {
		so, err := c.gatherServer(nc, i)
		if err != nil {
			return err
		}
		st.servers = append(st.servers, so)
	}
	stss, err := c.statefulSets.StatefulSets(nc.Namespace).List(labels.SelectorFromSet(labels.Set{clusterv1beta1.LabelCluster: nc.Name}))
	if err != nil {
		return err
	}
	for _, sts := range stss {
		i, ok := render.ServerOrdinal(nc.Name, sts.Name)
		if !ok || i < nc.Spec.Replicas || !metav1.IsControlledBy(sts, nc) {
			continue
		}
		so, err := c.gatherServer(nc, i)
		if err != nil {
			return err
		}
		st.extra = append(st.extra, so)
	}
	slices.SortFunc(st.extra, func(a, b serverObjects) int { return cmp.Compare(a.ordinal, b.ordinal) })
	return nil
}

// gatherServer reads one server's objects.
func (c *Controller) gatherServer(nc *clusterv1beta1.NatsCluster, i int32) (serverObjects, error) {
	so := serverObjects{name: render.ServerName(nc.Name, i), ordinal: i}
	if sts, err := c.statefulSets.StatefulSets(nc.Namespace).Get(render.StatefulSetName(nc.Name, i)); err == nil {
		if !metav1.IsControlledBy(sts, nc) {
			return so, &notControlledError{"StatefulSet", sts.Namespace, sts.Name}
		}
		so.statefulSet = sts
	} else if !apierrors.IsNotFound(err) {
		return so, err
	}
	if cm, err := c.configMaps.ConfigMaps(nc.Namespace).Get(render.ConfigMapName(nc.Name, i)); err == nil {
		if !metav1.IsControlledBy(cm, nc) {
			return so, &notControlledError{"ConfigMap", cm.Namespace, cm.Name}
		}
		so.configMap = cm
	} else if !apierrors.IsNotFound(err) {
		return so, err
	}
	if pod, err := c.pods.Pods(nc.Namespace).Get(render.PodName(nc.Name, i)); err == nil {
		if so.statefulSet != nil && metav1.IsControlledBy(pod, so.statefulSet) {
			so.pod = pod
		}
	} else if !apierrors.IsNotFound(err) {
		return so, err
	}
	return so, nil
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
			"NatsOperatorTrust %s/%s named by spec.auth.trustRef does not exist: create it or fix the reference",
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
				"NatsAccountTrust %s/%s named by spec.auth.accountTrustRefs does not exist: create it or remove the reference",
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
				"Secret %s/%s named by spec.auth.systemCredentials does not exist: create it with the creds file of a system account user under key %q",
				nc.Namespace, sc.SecretKeyRef.Name, key)}
		}
		if err != nil {
			return err
		}
		creds, ok := secret.Data[key]
		if !ok || len(creds) == 0 {
			return &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
				"Secret %s/%s named by spec.auth.systemCredentials has no key %q: add the creds file of a system account user under it",
				nc.Namespace, sc.SecretKeyRef.Name, key)}
		}
		st.systemCreds = creds
	}
	st.trust = trust
	return nil
}
