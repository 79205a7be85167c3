package controller

// The controller's own users of the system account in operator mode. When
// a NatsOperatorTrust gives the system account's signing key
// (spec.systemAccountSigningKey), gather mints a short-lived user with it
// (pkg/sysuser) instead of reading spec.auth.systemCredentials, keeps it
// per cluster, and mints the next one in the last third of its lifetime;
// the $SYS connection made with the old creds is replaced (observe keys
// its connection by the creds). Nothing is written: the user lives only in
// the controller's memory, and a restarted controller mints a new one.

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/sysuser"
)

// DefaultSystemUserLifetime is how long a minted system user is valid. No
// use of it lasts long: each request waits seconds, and the $SYS
// connection is made again with each new user. So the lifetime bounds only
// how long a leaked creds file is of use; the renewal, due after 10
// minutes (the last third), has 5 minutes to land, and a user that expires
// all the same is replaced by the next sync.
const DefaultSystemUserLifetime = 15 * time.Minute

// defaultSigningKeyKey is the Secret key of the signing key seed when
// spec.systemAccountSigningKey.key is empty.
const defaultSigningKeyKey = "seed"

// mintedUsers keeps the current minted user of each cluster. The zero
// value (with a lifetime) is ready; it is safe for concurrent use.
type mintedUsers struct {
	lifetime time.Duration

	mu    sync.Mutex
	users map[string]mintedUser // by the cluster's namespace/name
}

type mintedUser struct {
	// signer is the public key the user was issued by.
	signer string
	user   *sysuser.User
}

// credsFor returns the cluster's minted user, minting a new one when there
// is none, it was issued by another key, or it is due.
func (m *mintedUsers) credsFor(cluster string, s *sysuser.Signer, now time.Time) (*sysuser.User, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.users[cluster]; ok && u.signer == s.Key && !sysuser.Due(u.user.Expires, now, m.lifetime) {
		return u.user, false, nil
	}
	u, err := s.Mint(render.SystemUserName, now, m.lifetime)
	if err != nil {
		return nil, false, err
	}
	if m.users == nil {
		m.users = map[string]mintedUser{}
	}
	m.users[cluster] = mintedUser{signer: s.Key, user: u}
	return u, true, nil
}

// forget drops a cluster's minted user (the cluster is gone).
func (m *mintedUsers) forget(cluster string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.users, cluster)
}

// gatherMintedSystemUser reads the signing key the trust names and returns the
// creds of the cluster's current minted user, and when the next one is due
// (the sync looks again by then, so the renewal never waits for an event).
// A missing Secret or key is
// CredentialsNotFound, a seed that is not of the system account
// TrustInvalid, each naming the trust's field and never the seed.
func (g *gatherer) gatherMintedSystemUser(ctx context.Context, f *facts, ot *trustv1beta1.NatsOperatorTrust, now time.Time) ([]byte, time.Time, error) {
	nc, sk := f.nc, ot.Spec.SystemAccountSigningKey
	key := sk.Key
	if key == "" {
		key = defaultSigningKeyKey
	}
	field := fmt.Sprintf("NatsOperatorTrust %s/%s spec.systemAccountSigningKey", ot.Namespace, ot.Name)
	secret, err := g.src.API.Secret(ctx, nc.Namespace, sk.Name)
	if apierrors.IsNotFound(err) {
		return nil, time.Time{}, &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
			"Secret %s/%s named by %s does not exist: create it with the seed of the system account's signing key under key %q, or give spec.auth.systemCredentials",
			nc.Namespace, sk.Name, field, key)}
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	seed, ok := secret.Data[key]
	if !ok || len(seed) == 0 {
		return nil, time.Time{}, &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
			"Secret %s/%s named by %s has no key %q: add the seed of the system account's signing key under it",
			nc.Namespace, sk.Name, field, key)}
	}
	signer, err := sysuser.NewSigner(seed, ot.Spec.SystemAccountJWT)
	if err != nil {
		return nil, time.Time{}, &referenceError{clusterv1beta1.ReasonTrustInvalid, fmt.Sprintf(
			"key %q of Secret %s/%s named by %s %s", key, nc.Namespace, sk.Name, field, err)}
	}
	u, fresh, err := g.minted.credsFor(nc.Namespace+"/"+nc.Name, signer, now)
	if err != nil {
		return nil, time.Time{}, &referenceError{clusterv1beta1.ReasonReconcileFailed, "minting the controller's system user: " + err.Error()}
	}
	if fresh {
		klog.FromContext(ctx).V(2).Info("Minted a system account user", "cluster", klog.KObj(nc), "user", u.PublicKey, "expires", u.Expires)
	}
	return u.Creds, sysuser.RenewAt(u.Expires, g.minted.lifetime), nil
}
