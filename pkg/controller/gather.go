package controller

// The gatherer: the only code of a sync that reads (the gather*.go files,
// through Sources). A sync runs in four phases:
//
//	gather:  every object the sync needs, once, into immutable facts: the
//	         cluster's servers (StatefulSets beyond spec.replicas included),
//	         the Services, PDB and NetworkPolicy, the references of
//	         spec.auth and spec.tls, the claims the spec may change, the
//	         Certificate and PodMonitor; and what needs entropy or the
//	         clock (a new system user, route TLS made or renewed)
//	observe: the NATS servers named by the facts (pkg/observe)
//	decide:  a pure function of the facts and the observation: render,
//	         the planner's input, the planner's Decision, and the
//	         supporting objects to write, as one plan (decide.go)
//	write:   the plan's writers, one per kind of supporting object, then
//	         the servers to create, the one step, the one-shot annotations
//	         to clear (write.go); report: status, Events and metrics, from
//	         the plan (sync.go)
//
// A reference that does not resolve, or an object in the way, becomes
// facts.unresolved: the planner holds with its reason and no server is
// created or touched.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
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
	// podGoing says the pod is being deleted, or was deleted by this
	// controller and the cache does not show it yet (podDeletions).
	podGoing bool
}

// facts are what one sync gathered. Nothing writes them after gather
// returns (a sync in the unit tests compares them before and after).
type facts struct {
	nc *clusterv1beta1.NatsCluster
	// trust is nil without spec.auth.
	trust *render.Trust
	// systemCreds is the creds file of spec.auth.systemCredentials, or of
	// the user minted with the trust's systemAccountSigningKey
	// (systemCredsMinted).
	systemCreds       []byte
	systemCredsMinted bool
	// systemCredsRenew is when the minted user is due for renewal; zero
	// without one.
	systemCredsRenew time.Time
	// servers in ordinal order, one per spec.replicas.
	servers []serverObjects
	// extra are the servers beyond spec.replicas that still have a
	// StatefulSet, in ordinal order.
	extra []serverObjects
	// shared are the Services and the PDB; networkPolicy the cluster's
	// NetworkPolicy (nil when absent).
	shared        sharedObjects
	networkPolicy *networkingv1.NetworkPolicy
	// podMonitor is the cluster's PodMonitor (nil when absent);
	// podMonitorsServed says whether the API server serves the kind.
	podMonitor        *unstructured.Unstructured
	podMonitorsServed bool
	// systemUser is the controller's system user of a cluster without
	// auth, from its Secret; nil when there is none. freshSystemUser is
	// a new one, made when there is none (decide chooses whether to use
	// it: systemuser.go).
	systemUser      *systemUser
	freshSystemUser *corev1.Secret
	// upgradedSystemUser is the system user Secret of an earlier release
	// with its nkey seed added, to be written before anything renders it;
	// systemUser is then its user.
	upgradedSystemUser *corev1.Secret
	// tls are the routes' and clients' certificates to render; tlsCA the
	// PEM CA the client certificate chains to (for the controller's own
	// connections), nil without client TLS.
	tls   render.TLS
	tlsCA []byte
	// routesCA is the PEM CA the routes' certificate chains to, nil
	// without route TLS: the first CA of the gateway CA bundle.
	routesCA []byte
	// clientCert is the controller's own client certificate under
	// spec.tls.verifyClients (gatherClientCA); nil otherwise.
	clientCert *pki.Pair
	// tlsSecrets are the Secrets of the cluster gather made or renewed
	// (the routes' TLS, and the controller's client CA: the CA missing or
	// invalid, the certificate due, the bundle changed; the copy of the
	// leaf remotes' credentials): they are written before anything that
	// renders them.
	tlsSecrets []*corev1.Secret
	// supercluster are the members (namespace/name, sorted) of the
	// supercluster of a cluster with spec.gateway that this controller
	// runs, the cluster among them (gatherSupercluster).
	supercluster []string
	// jetStreamRemotes are the gateway remotes (by name) that run or may
	// run a JetStream meta group of their own (gatherSupercluster).
	jetStreamRemotes []string
	// migrationBackups and migrationRestores are the NatsBackups and
	// NatsRestores of the cluster's JetStream migrations
	// (gatherMigration), copies.
	migrationBackups  []*clusterv1beta1.NatsBackup
	migrationRestores []*clusterv1beta1.NatsRestore
	// migrationAccount is the account of spec.jetstream.migration's
	// credentials, or migrationAccountProblem says why it is unknown.
	migrationAccount, migrationAccountProblem string
	// certificate is the client Certificate of spec.tls.certificate as the
	// API server holds it; nil when absent. certificateWrite is what to
	// create or update, said once it was read (absent or not); nil when it
	// is as the spec asks or was not read.
	certificate      *unstructured.Unstructured
	certificateWrite *unstructured.Unstructured
	// claims are the claims the sync needs, by ordinal (gatherClaims);
	// expandable the StorageClasses of claims asked to grow that allow
	// expansion, by name.
	claims     map[int32]*corev1.PersistentVolumeClaim
	expandable map[string]bool
	// unresolved is why the target cannot be computed or acted on (a
	// reference that does not resolve, an object in the way); nil when it
	// can.
	unresolved *rollout.Blocked
}

// gatherer reads facts through Sources, keeping what it may keep between
// syncs (the checked system user Secrets).
type gatherer struct {
	src         Sources
	systemUsers *systemUserCache
	// minted are the system account users minted with trusts' signing keys.
	minted *mintedUsers
	// deletions are the pods this controller deleted (nil: none known, as
	// in kubectl nats plan).
	deletions *podDeletions
}

// gather reads the cluster's references and objects. A reference that
// cannot be resolved, or an object in the way, is recorded in unresolved;
// the servers are gathered regardless, so the cluster stays observed. The
// error is one to retry (a lister or a read failing).
func (g *gatherer) gather(ctx context.Context, nc *clusterv1beta1.NatsCluster, now time.Time) (*facts, error) {
	f := &facts{nc: nc}
	var err error
	if f.shared, err = g.gatherShared(nc); err != nil {
		return nil, err
	}
	if err := g.gatherSupporting(ctx, f); err != nil {
		return nil, err
	}
	err = g.gatherServers(f, now)
	if err == nil {
		err = g.gatherClaims(ctx, f)
	}
	if err == nil {
		err = g.gatherAuth(ctx, f, now)
	}
	if err == nil {
		err = g.gatherSystemUser(ctx, f)
	}
	if err == nil {
		err = g.gatherTLS(ctx, f, now)
	}
	if err == nil {
		err = g.gatherReferenceConsent(f)
	}
	if err == nil {
		err = g.gatherGatewayTLS(ctx, f)
	}
	if err == nil {
		err = g.gatherSupercluster(f)
	}
	if err == nil {
		err = g.gatherLeafCredentials(ctx, f)
	}
	if err == nil {
		err = g.gatherMigration(ctx, f)
	}
	var refErr *referenceError
	var nce *notControlledError
	switch {
	case errors.As(err, &refErr):
		f.unresolved = &rollout.Blocked{Reason: refErr.reason, Message: refErr.message}
	case errors.As(err, &nce):
		f.unresolved = &rollout.Blocked{Reason: clusterv1beta1.ReasonReconcileFailed, Message: nce.Error()}
	case err != nil:
		return nil, err
	}
	return f, nil
}

// gatherCluster reads the NatsCluster a sync is for.
func (g *gatherer) gatherCluster(namespace, name string) (*clusterv1beta1.NatsCluster, error) {
	return g.src.Clusters.NatsClusters(namespace).Get(name)
}

// gatherShared reads the Services and the PDB.
func (g *gatherer) gatherShared(nc *clusterv1beta1.NatsCluster) (sharedObjects, error) {
	var sh sharedObjects
	get := func(name string) (*corev1.Service, error) {
		svc, err := g.src.Services.Services(nc.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return svc, err
	}
	var err error
	if sh.clientService, err = get(nc.Name); err != nil {
		return sh, err
	}
	if sh.headlessService, err = get(render.HeadlessServiceName(nc.Name)); err != nil {
		return sh, err
	}
	sh.pdb, err = g.src.PDBs.PodDisruptionBudgets(nc.Namespace).Get(nc.Name)
	if apierrors.IsNotFound(err) {
		sh.pdb, err = nil, nil
	}
	return sh, err
}

// gatherSupporting reads the NetworkPolicy and the PodMonitor.
func (g *gatherer) gatherSupporting(ctx context.Context, f *facts) error {
	nc := f.nc
	np, err := g.src.NetworkPolicies.NetworkPolicies(nc.Namespace).Get(nc.Name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		f.networkPolicy = np
	}
	f.podMonitor, f.podMonitorsServed, err = g.src.API.PodMonitor(ctx, nc.Namespace, nc.Name)
	return err
}

// gatherServers reads the objects of every server of the spec, and of every
// server beyond it that still has a StatefulSet the cluster controls.
func (g *gatherer) gatherServers(f *facts, now time.Time) error {
	nc := f.nc
	for i := range nc.Spec.Replicas {
		so, err := g.gatherServer(nc, i, now)
		if err != nil {
			return err
		}
		f.servers = append(f.servers, so)
	}
	stss, err := g.src.StatefulSets.StatefulSets(nc.Namespace).List(labels.SelectorFromSet(labels.Set{clusterv1beta1.LabelCluster: nc.Name}))
	if err != nil {
		return err
	}
	for _, sts := range stss {
		i, ok := render.ServerOrdinal(nc.Name, sts.Name)
		if !ok || i < nc.Spec.Replicas || !metav1.IsControlledBy(sts, nc) {
			continue
		}
		so, err := g.gatherServer(nc, i, now)
		if err != nil {
			return err
		}
		f.extra = append(f.extra, so)
	}
	slices.SortFunc(f.extra, func(a, b serverObjects) int { return cmp.Compare(a.ordinal, b.ordinal) })
	return nil
}

// gatherServer reads one server's objects, and whether its pod is going
// (being deleted, or deleted by this controller and not shown so yet).
func (g *gatherer) gatherServer(nc *clusterv1beta1.NatsCluster, i int32, now time.Time) (serverObjects, error) {
	so := serverObjects{name: render.ServerName(nc.Name, i), ordinal: i}
	if sts, err := g.src.StatefulSets.StatefulSets(nc.Namespace).Get(render.StatefulSetName(nc.Name, i)); err == nil {
		if !metav1.IsControlledBy(sts, nc) {
			return so, &notControlledError{"StatefulSet", sts.Namespace, sts.Name}
		}
		so.statefulSet = sts
	} else if !apierrors.IsNotFound(err) {
		return so, err
	}
	if cm, err := g.src.ConfigMaps.ConfigMaps(nc.Namespace).Get(render.ConfigMapName(nc.Name, i)); err == nil {
		if !metav1.IsControlledBy(cm, nc) {
			return so, &notControlledError{"ConfigMap", cm.Namespace, cm.Name}
		}
		so.configMap = cm
	} else if !apierrors.IsNotFound(err) {
		return so, err
	}
	if pod, err := g.src.Pods.Pods(nc.Namespace).Get(render.PodName(nc.Name, i)); err == nil {
		if so.statefulSet != nil && metav1.IsControlledBy(pod, so.statefulSet) {
			so.pod = pod
			so.podGoing = g.deletions.going(pod, now)
		}
	} else if !apierrors.IsNotFound(err) {
		return so, err
	}
	return so, nil
}

// gatherClaims reads the claims a sync may act on, and no other, so a
// cluster at rest reads none: a claim asked to grow (the spec asks for more
// storage than the server's claim template; with its StorageClass while it
// has not grown), the claim of a server to create (an old one still going
// is waited for), of a server beyond the spec or being replaced that is on
// a volume or stopped (deleted with it), and every claim of a cluster being deleted whose claims go
// with it.
func (g *gatherer) gatherClaims(ctx context.Context, f *facts) error {
	nc := f.nc
	var want *resource.Quantity
	if js := nc.Spec.JetStream; js != nil && js.VolumeClaimTemplate != nil {
		q := js.VolumeClaimTemplate.Spec.Resources.Requests[corev1.ResourceStorage]
		want = &q
	}
	deleting := nc.DeletionTimestamp != nil && nc.Spec.JetStream != nil && nc.Spec.JetStream.VolumeClaimTemplate != nil &&
		nc.Spec.JetStream.VolumeClaimTemplate.WhenDeleted == clusterv1beta1.ClaimDelete
	replaced := map[string]bool{nc.Annotations[clusterv1beta1.AnnotationReplaceServer]: true}
	for _, r := range nc.Status.Removals {
		replaced[r.Server] = true
	}
	needed := func(so serverObjects, extra bool) (need, grows bool) {
		onVolume := want != nil || (so.statefulSet != nil && len(so.statefulSet.Spec.VolumeClaimTemplates) > 0)
		switch {
		case extra || replaced[so.name]:
			// Deleted with the server once it is stopped.
			return onVolume || stopped(so.statefulSet), false
		case deleting:
			return true, false
		case want == nil:
			return false, false
		case so.statefulSet == nil:
			return true, false
		}
		vcts := so.statefulSet.Spec.VolumeClaimTemplates
		if len(vcts) != 1 {
			return false, false
		}
		have := vcts[0].Spec.Resources.Requests[corev1.ResourceStorage]
		return want.Cmp(have) > 0, want.Cmp(have) > 0
	}
	for _, set := range []struct {
		servers []serverObjects
		extra   bool
	}{{f.servers, false}, {f.extra, true}} {
		for _, so := range set.servers {
			need, grows := needed(so, set.extra)
			if !need {
				continue
			}
			claim, err := g.src.API.Claim(ctx, nc.Namespace, claimName(nc, so.ordinal))
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return fmt.Errorf("reading the claim of %s: %w", so.name, err)
			}
			if f.claims == nil {
				f.claims = map[int32]*corev1.PersistentVolumeClaim{}
			}
			f.claims[so.ordinal] = claim
			if grows {
				if err := g.gatherStorageClass(ctx, f, claim, *want); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// gatherStorageClass records whether the class of a claim that has not yet
// grown to size allows expansion.
func (g *gatherer) gatherStorageClass(ctx context.Context, f *facts, claim *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := claim.Status.Capacity[corev1.ResourceStorage]
	if requested.Cmp(size) >= 0 && capacity.Cmp(size) >= 0 {
		return nil
	}
	name := ""
	if claim.Spec.StorageClassName != nil {
		name = *claim.Spec.StorageClassName
	}
	if _, seen := f.expandable[name]; seen || name == "" {
		return nil
	}
	if f.expandable == nil {
		f.expandable = map[string]bool{}
	}
	class, err := g.src.API.StorageClass(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		f.expandable[name] = false
	case err != nil:
		return fmt.Errorf("reading StorageClass %s: %w", name, err)
	default:
		f.expandable[name] = expands(class)
	}
	return nil
}

// expands says a StorageClass allows volume expansion.
func expands(class *storagev1.StorageClass) bool {
	return class.AllowVolumeExpansion != nil && *class.AllowVolumeExpansion
}

// gatherAuth reads the references of spec.auth.
func (g *gatherer) gatherAuth(ctx context.Context, f *facts, now time.Time) error {
	nc := f.nc
	auth := nc.Spec.Auth
	if auth == nil {
		return nil
	}
	ot, err := g.src.OperatorTrusts.NatsOperatorTrusts(nc.Namespace).Get(auth.TrustRef.Name)
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
		at, err := g.src.AccountTrusts.NatsAccountTrusts(nc.Namespace).Get(ref.Name)
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
		creds, err := g.credsFile(ctx, nc, sc.SecretKeyRef, "spec.auth.systemCredentials", "the creds file of a system account user")
		if err != nil {
			return err
		}
		f.systemCreds = creds
	} else if sk := ot.Spec.SystemAccountSigningKey; sk != nil {
		creds, renew, err := g.gatherMintedSystemUser(ctx, f, ot, now)
		if err != nil {
			return err
		}
		f.systemCreds, f.systemCredsMinted, f.systemCredsRenew = creds, true, renew
	}
	f.trust = trust
	return nil
}

// credsFile reads the creds file at sel (key default user.creds), named
// by field; a Secret or key missing is a referenceError
// (CredentialsNotFound) saying to put what there.
func (g *gatherer) credsFile(ctx context.Context, nc *clusterv1beta1.NatsCluster, sel clusterv1beta1.SecretKeySelector, field, what string) ([]byte, error) {
	key := sel.Key
	if key == "" {
		key = "user.creds"
	}
	secret, err := g.src.API.Secret(ctx, nc.Namespace, sel.Name)
	if apierrors.IsNotFound(err) {
		return nil, &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
			"Secret %s/%s named by %s does not exist: create it with %s under key %q", nc.Namespace, sel.Name, field, what, key)}
	}
	if err != nil {
		return nil, err
	}
	creds := secret.Data[key]
	if len(creds) == 0 {
		return nil, &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
			"Secret %s/%s named by %s has no key %q: add %s under it", nc.Namespace, sel.Name, field, key, what)}
	}
	return creds, nil
}

// gatherSystemUser reads the system user Secret of a cluster without auth,
// or, when there is none, offers a fresh one (render chooses whether to
// use it: render.Input.FreshSystemUser), the same one on every sync until
// the Secret exists (systemUserCache.freshFor).
func (g *gatherer) gatherSystemUser(ctx context.Context, f *facts) error {
	nc := f.nc
	if nc.Spec.Auth != nil {
		return nil
	}
	s, err := g.src.API.Secret(ctx, nc.Namespace, systemUserSecretName(nc.Name))
	if apierrors.IsNotFound(err) {
		fresh, err := g.systemUsers.freshFor(nc)
		if err != nil {
			return &referenceError{clusterv1beta1.ReasonReconcileFailed, err.Error()}
		}
		f.freshSystemUser = fresh
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(s, nc) {
		return &notControlledError{"Secret", s.Namespace, s.Name}
	}
	g.systemUsers.forgetFresh(nc.Namespace, nc.Name)
	user, password, ru, err := g.systemUsers.get(s)
	if err != nil {
		return &referenceError{clusterv1beta1.ReasonReconcileFailed,
			err.Error() + "; delete the Secret and the controller makes a new one (the servers are then reloaded or restarted onto it)"}
	}
	if ru.NKey == "" {
		// A Secret of an earlier release: the seed added goes into the
		// Secret before anything renders the nkey user.
		up, err := g.systemUsers.upgradedFor(s)
		if err != nil {
			return &referenceError{clusterv1beta1.ReasonReconcileFailed, err.Error()}
		}
		f.upgradedSystemUser = up
		f.systemUser = freshSystemUser(up)
		return nil
	}
	f.systemUser = &systemUser{user: user, password: password, seed: s.Data[systemUserKeyNKeySeed], render: ru}
	return nil
}
