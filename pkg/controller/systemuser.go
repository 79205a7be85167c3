package controller

// The Secret of the controller's system user. A cluster without spec.auth
// renders an accounts block with one user of the built-in system account
// ($SYS, see render.SystemUser); the controller connects as that user to
// send the $SYS requests (config reload, peer removal). The controller
// generates the password once, keeps it with its bcrypt hash in a Secret it
// owns, and renders the hash, so the rendered config stays the same from one
// sync to the next.

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// systemUserSecretSuffix makes the name of a cluster's system user Secret
// from the cluster's name.
const systemUserSecretSuffix = "-system-user"

// Keys of the system user Secret.
const (
	// systemUserKeyUser is the user name, render.SystemUserName.
	systemUserKeyUser = "user"
	// systemUserKeyPassword is the password the controller connects with.
	systemUserKeyPassword = "password"
	// systemUserKeyPasswordHash is the bcrypt hash of the password, the
	// one rendered into nats.conf.
	systemUserKeyPasswordHash = "passwordHash"
	// systemUserKeyNKeySeed is the seed of the user's nkey (SU...): the
	// servers render the nkey user (render.SystemUser.NKey) and the
	// controller signs their nonce with it, so nothing secret is sent.
	// Secrets of releases before it have no such key; the controller adds
	// one (upgradeSystemUserSecret) and the servers reload onto the nkey.
	systemUserKeyNKeySeed = "nkeySeed"
)

// systemUserPasswordBytes is how many random bytes make a password: 32
// bytes (256 bits), 43 characters once encoded, well within bcrypt's 72.
const systemUserPasswordBytes = 32

// systemUserSecretName is the name of a cluster's system user Secret:
// systemUserSecretName("demo") = "demo-system-user".
func systemUserSecretName(cluster string) string {
	return cluster + systemUserSecretSuffix
}

// newSystemUserSecret generates the system user Secret of a NatsCluster: a
// new random password (32 bytes from crypto/rand, base64 URL encoding
// without padding) and its bcrypt hash at bcrypt.DefaultCost, labelled as
// every object of the cluster and controlled by it. Every call makes a new
// password; the error is one of crypto/rand or bcrypt and holds no secret.
func newSystemUserSecret(nc *clusterv1beta1.NatsCluster) (*corev1.Secret, error) {
	raw := make([]byte, systemUserPasswordBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generating the system user password of NatsCluster %s: %w", klog.KObj(nc), err)
	}
	password := base64.RawURLEncoding.EncodeToString(raw)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("hashing the system user password of NatsCluster %s: %w", klog.KObj(nc), err)
	}
	seed, err := newSystemUserSeed()
	if err != nil {
		return nil, fmt.Errorf("making the system user nkey of NatsCluster %s: %w", klog.KObj(nc), err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            systemUserSecretName(nc.Name),
			Namespace:       nc.Namespace,
			Labels:          render.ClusterLabels(nc.Name),
			OwnerReferences: []metav1.OwnerReference{render.OwnerReference(nc)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			systemUserKeyUser:         []byte(render.SystemUserName),
			systemUserKeyPassword:     []byte(password),
			systemUserKeyPasswordHash: hash,
			systemUserKeyNKeySeed:     seed,
		},
	}, nil
}

// newSystemUserSeed makes the seed of a new user nkey.
func newSystemUserSeed() ([]byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return render.SystemUserSeed(raw)
}

// upgradeSystemUserSecret is a system user Secret of an earlier release,
// which has no nkey seed, with one added: the servers then reload from the
// password user onto the nkey user (rollout.ChangeSystemUserNKey).
func upgradeSystemUserSecret(s *corev1.Secret) (*corev1.Secret, error) {
	seed, err := newSystemUserSeed()
	if err != nil {
		return nil, fmt.Errorf("making the system user nkey for Secret %s: %w", klog.KObj(s), err)
	}
	up := s.DeepCopy()
	if up.Data == nil {
		up.Data = map[string][]byte{}
	}
	up.Data[systemUserKeyNKeySeed] = seed
	return up, nil
}

// systemUserNKey reads the nkey seed of a system user Secret: its public
// key, or "" when the Secret has no seed (an earlier release's). A seed that
// is not a user seed is an error naming the key, never the seed.
func systemUserNKey(s *corev1.Secret) (string, error) {
	seed, ok := s.Data[systemUserKeyNKeySeed]
	if !ok {
		return "", nil
	}
	pub, err := render.SystemUserNKeyOf(seed)
	if err != nil {
		return "", fmt.Errorf("system user Secret %s: key %q is %v", klog.KObj(s), systemUserKeyNKeySeed, err)
	}
	return pub, nil
}

// systemUserFromSecret reads the system user from its Secret: the user name
// and password the controller connects with, and the render.SystemUser to
// render. Every key must be there and not empty, and passwordHash must be
// the bcrypt hash of password, so a hand-edited Secret is refused rather
// than rendered into a config the controller cannot connect to. Errors name
// the Secret and the key, never the password or the hash.
//
// The check runs bcrypt at the hash's cost (about 50 ms at
// bcrypt.DefaultCost): callers that read the Secret on every sync go through
// a systemUserCache, which checks each resourceVersion once.
func systemUserFromSecret(s *corev1.Secret) (user, password string, ru *render.SystemUser, err error) {
	value := func(key string) (string, error) {
		v, ok := s.Data[key]
		if !ok {
			return "", fmt.Errorf("system user Secret %s has no key %q", klog.KObj(s), key)
		}
		if len(v) == 0 {
			return "", fmt.Errorf("system user Secret %s has an empty key %q", klog.KObj(s), key)
		}
		return string(v), nil
	}
	if user, err = value(systemUserKeyUser); err != nil {
		return "", "", nil, err
	}
	if password, err = value(systemUserKeyPassword); err != nil {
		return "", "", nil, err
	}
	hash, err := value(systemUserKeyPasswordHash)
	if err != nil {
		return "", "", nil, err
	}
	// bcrypt's own errors are not wrapped: some quote bytes of the hash.
	switch err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); {
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return "", "", nil, fmt.Errorf("system user Secret %s: key %q is not the hash of key %q", klog.KObj(s), systemUserKeyPasswordHash, systemUserKeyPassword)
	case err != nil:
		return "", "", nil, fmt.Errorf("system user Secret %s: key %q is not a bcrypt hash", klog.KObj(s), systemUserKeyPasswordHash)
	}
	pub, err := systemUserNKey(s)
	if err != nil {
		return "", "", nil, err
	}
	return user, password, &render.SystemUser{Name: user, PasswordHash: hash, NKey: pub}, nil
}

// systemUserCache remembers what systemUserFromSecret said of each system
// user Secret, by namespace/name and resourceVersion, so the bcrypt check
// runs once per version of the Secret rather than on every sync. It only
// saves time: what it returns is what systemUserFromSecret returns for the
// same Secret. It keeps the latest version of each Secret; a Secret without
// a resourceVersion (not read from the API server) is checked every time.
// The zero value is ready; it is safe for concurrent use.
type systemUserCache struct {
	// parse is systemUserFromSecret; tests count its calls.
	parse func(*corev1.Secret) (string, string, *render.SystemUser, error)

	// mint is newSystemUserSecret; tests count its calls.
	mint func(*clusterv1beta1.NatsCluster) (*corev1.Secret, error)

	mu      sync.Mutex
	entries map[string]systemUserEntry // by namespace/name
	// fresh are the fresh system user Secrets made for clusters without
	// one, by the cluster's namespace/name, kept until the cluster's
	// Secret exists (or the cluster is gone): a cluster an older release
	// made whose objects do not change is offered the same fresh user on
	// every sync, and bcrypt runs once for it, not once a sync.
	fresh map[string]*corev1.Secret
	// upgraded are the Secrets of earlier releases with a seed added
	// (upgradeSystemUserSecret), by namespace/name, for the
	// resourceVersion they were made from: every sync until the update
	// lands offers the same seed.
	upgraded map[string]*corev1.Secret
}

// upgradedFor returns s with an nkey seed added, the same one while s keeps
// its resourceVersion (a copy: the caller may change what it got).
func (c *systemUserCache) upgradedFor(s *corev1.Secret) (*corev1.Secret, error) {
	key := s.Namespace + "/" + s.Name
	c.mu.Lock()
	up, ok := c.upgraded[key]
	c.mu.Unlock()
	if ok && up.ResourceVersion == s.ResourceVersion && up.UID == s.UID {
		return up.DeepCopy(), nil
	}
	up, err := upgradeSystemUserSecret(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.upgraded == nil {
		c.upgraded = map[string]*corev1.Secret{}
	}
	c.upgraded[key] = up
	c.mu.Unlock()
	return up.DeepCopy(), nil
}

// freshFor returns a fresh system user Secret for nc: the one made for it
// before while it has the same uid, else a new one (a copy: the caller may
// change what it got).
func (c *systemUserCache) freshFor(nc *clusterv1beta1.NatsCluster) (*corev1.Secret, error) {
	key := nc.Namespace + "/" + nc.Name
	c.mu.Lock()
	s, ok := c.fresh[key]
	c.mu.Unlock()
	if ok && len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == nc.UID {
		return s.DeepCopy(), nil
	}
	mint := c.mint
	if mint == nil {
		mint = newSystemUserSecret
	}
	// Made outside the lock: other clusters need not wait for bcrypt.
	s, err := mint(nc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.fresh == nil {
		c.fresh = map[string]*corev1.Secret{}
	}
	c.fresh[key] = s
	c.mu.Unlock()
	return s.DeepCopy(), nil
}

// forgetFresh drops the fresh Secret kept for a cluster (its Secret exists).
func (c *systemUserCache) forgetFresh(namespace, cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.fresh, namespace+"/"+cluster)
}

// forgetCluster drops all the cache holds of a cluster that is gone: its
// Secret's password and any fresh Secret made for it.
func (c *systemUserCache) forgetCluster(namespace, cluster string) {
	c.forget(namespace, systemUserSecretName(cluster))
	c.forgetFresh(namespace, cluster)
}

// systemUserEntry is what one version of a Secret gave.
type systemUserEntry struct {
	resourceVersion string
	user, password  string
	systemUser      *render.SystemUser
	err             error
}

// get returns what systemUserFromSecret returns for s, checking s only when
// this version of it was not checked before.
func (c *systemUserCache) get(s *corev1.Secret) (user, password string, ru *render.SystemUser, err error) {
	parse := c.parse
	if parse == nil {
		parse = systemUserFromSecret
	}
	if s.ResourceVersion == "" {
		return parse(s)
	}
	key := s.Namespace + "/" + s.Name
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok || e.resourceVersion != s.ResourceVersion {
		// Checked outside the lock: other Secrets need not wait for bcrypt.
		e = systemUserEntry{resourceVersion: s.ResourceVersion}
		e.user, e.password, e.systemUser, e.err = parse(s)
		c.mu.Lock()
		if c.entries == nil {
			c.entries = map[string]systemUserEntry{}
		}
		c.entries[key] = e
		c.mu.Unlock()
	}
	if e.systemUser != nil {
		// A copy: the caller may change what it got.
		cp := *e.systemUser
		ru = &cp
	}
	return e.user, e.password, ru, e.err
}

// forget drops what the cache holds of one Secret (deleted, or its cluster
// deleted).
func (c *systemUserCache) forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, namespace+"/"+name)
	delete(c.upgraded, namespace+"/"+name)
}

// freshSystemUser is the system user of a Secret newSystemUserSecret just
// made (no need to check its hash against its password).
func freshSystemUser(s *corev1.Secret) *systemUser {
	user, password := string(s.Data[systemUserKeyUser]), string(s.Data[systemUserKeyPassword])
	pub, _ := systemUserNKey(s)
	return &systemUser{user: user, password: password, seed: s.Data[systemUserKeyNKeySeed],
		render: &render.SystemUser{Name: user, PasswordHash: string(s.Data[systemUserKeyPasswordHash]), NKey: pub}}
}
