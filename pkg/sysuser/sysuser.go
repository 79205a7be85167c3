package sysuser

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/nats-operator/nats-operator/pkg/act"
	"github.com/nats-operator/nats-operator/pkg/observe"
)

// Signer is a signing key of a system account, checked against the account
// JWT: the account's own identity key or one of its signing keys.
type Signer struct {
	kp nkeys.KeyPair
	// Account is the system account's public key.
	Account string
	// Key is the signer's public key (the account's own, or a signing key).
	Key string
}

// NewSigner checks that seed is an account seed whose key is the system
// account of systemAccountJWT or one of that account's signing keys. The
// errors never hold the seed.
func NewSigner(seed []byte, systemAccountJWT string) (*Signer, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, errors.New("is not an nkey seed")
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, errors.New("is not the seed of an account key (SA...)")
	}
	ac, err := jwt.DecodeAccountClaims(systemAccountJWT)
	if err != nil {
		return nil, fmt.Errorf("cannot be checked: the system account JWT does not decode: %v", err)
	}
	if pub != ac.Subject && !slices.Contains(ac.SigningKeys.Keys(), pub) {
		return nil, fmt.Errorf("is of key %s, which is neither the system account %s nor one of its signing keys", pub, ac.Subject)
	}
	return &Signer{kp: kp, Account: ac.Subject, Key: pub}, nil
}

// User is a minted user: its creds file (JWT and seed, as nsc writes it)
// and when its JWT expires.
type User struct {
	Creds   []byte
	Expires time.Time
	// PublicKey is the user's public key, for logs and revocation.
	PublicKey string
}

// Permissions are what every minted user may do: publish exactly the
// requests the controller sends over the system account (pkg/observe's
// SystemSubjects and pkg/act's Subjects) and subscribe only to their
// replies (observe.SystemInboxes). Without them a user of the system
// account may publish and subscribe anywhere in it: listen to every
// account's connect events, ask any server for its connections, and, in a
// supercluster, do so on every member.
func Permissions() jwt.Permissions {
	var p jwt.Permissions
	p.Pub.Allow.Add(observe.SystemSubjects()...)
	p.Pub.Allow.Add(act.Subjects()...)
	p.Sub.Allow.Add(observe.SystemInboxes()...)
	return p
}

// Mint issues a new user of the system account named name, valid from a
// minute before now (clock skew) until now+lifetime, with Permissions.
func (s *Signer) Mint(name string, now time.Time, lifetime time.Duration) (*User, error) {
	if lifetime < time.Second {
		return nil, fmt.Errorf("a system user lifetime of %s is too short", lifetime)
	}
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("making the user nkey: %w", err)
	}
	upub, err := ukp.PublicKey()
	if err != nil {
		return nil, err
	}
	useed, err := ukp.Seed()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	uc.IssuedAt = now.Unix()
	uc.NotBefore = now.Add(-time.Minute).Unix()
	expires := now.Add(lifetime)
	uc.Expires = expires.Unix()
	uc.Permissions = Permissions()
	if s.Key != s.Account {
		uc.IssuerAccount = s.Account
	}
	token, err := uc.Encode(s.kp)
	if err != nil {
		return nil, fmt.Errorf("signing the user JWT: %w", err)
	}
	creds, err := jwt.FormatUserConfig(token, useed)
	if err != nil {
		return nil, err
	}
	return &User{Creds: creds, Expires: time.Unix(expires.Unix(), 0), PublicKey: upub}, nil
}

// Due says whether a user expiring at expires should be replaced at now: in
// the last third of its lifetime, so a renewal has two thirds of it to land
// before the servers close the connection of the expiring one.
func Due(expires, now time.Time, lifetime time.Duration) bool {
	return !now.Before(RenewAt(expires, lifetime))
}

// RenewAt is when a user expiring at expires becomes Due.
func RenewAt(expires time.Time, lifetime time.Duration) time.Time {
	return expires.Add(-lifetime / 3)
}
