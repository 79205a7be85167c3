package rendertest

import (
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// Fixture is a NATS operator with its system account and any number of
// accounts, each able to issue user creds.
type Fixture struct {
	// Operator is the NATS operator's identity key.
	Operator nkeys.KeyPair
	// SigningKey is the operator's signing key; accounts are issued by it
	// unless the fixture was made WithIdentityIssuer.
	SigningKey nkeys.KeyPair
	// OperatorJWT names the system account.
	OperatorJWT string
	// System is the system account (JetStream disabled, as required).
	System *Account
	// Accounts are the accounts made with WithAccounts, in that order.
	Accounts []*Account

	identityIssuer bool
}

// Account is an account with its keys and JWT.
type Account struct {
	// Name is the account's name and the NatsAccountTrust's name.
	Name      string
	Key       nkeys.KeyPair
	PublicKey string
	JWT       string
	// Seed is the account's seed.
	Seed []byte
}

type trustOptions struct {
	accounts       []string
	identityIssuer bool
	noSystemInOp   bool
}

// TrustOption changes NewTrust.
type TrustOption func(*trustOptions)

// WithAccounts adds accounts of these names (JetStream enabled, unlimited).
func WithAccounts(names ...string) TrustOption {
	return func(o *trustOptions) { o.accounts = append(o.accounts, names...) }
}

// WithIdentityIssuer issues accounts with the operator's identity key rather
// than its signing key.
func WithIdentityIssuer() TrustOption {
	return func(o *trustOptions) { o.identityIssuer = true }
}

// WithoutSystemAccountInOperator leaves system_account out of the operator
// JWT.
func WithoutSystemAccountInOperator() TrustOption {
	return func(o *trustOptions) { o.noSystemInOp = true }
}

// NewTrust makes a fresh NATS operator (with one signing key), its system
// account "SYS", and the accounts of WithAccounts.
func NewTrust(t testing.TB, opts ...TrustOption) *Fixture {
	t.Helper()
	var o trustOptions
	for _, opt := range opts {
		opt(&o)
	}
	f := &Fixture{
		Operator:       must(t, nkeys.CreateOperator),
		SigningKey:     must(t, nkeys.CreateOperator),
		identityIssuer: o.identityIssuer,
	}
	f.System = f.newAccount(t, "SYS", false)
	opPub, _ := f.Operator.PublicKey()
	skPub, _ := f.SigningKey.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "test-operator"
	oc.SigningKeys.Add(skPub)
	if !o.noSystemInOp {
		oc.SystemAccount = f.System.PublicKey
	}
	var err error
	if f.OperatorJWT, err = oc.Encode(f.Operator); err != nil {
		t.Fatalf("encoding operator JWT: %v", err)
	}
	for _, name := range o.accounts {
		f.Accounts = append(f.Accounts, f.newAccount(t, name, true))
	}
	return f
}

// NewAccount issues another account of this operator (not added to
// f.Accounts).
func (f *Fixture) NewAccount(t testing.TB, name string) *Account {
	t.Helper()
	return f.newAccount(t, name, true)
}

func (f *Fixture) newAccount(t testing.TB, name string, jetStream bool) *Account {
	t.Helper()
	kp := must(t, nkeys.CreateAccount)
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	if jetStream {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
			MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit,
		}
	}
	issuer := f.SigningKey
	if f.identityIssuer {
		issuer = f.Operator
	}
	token, err := ac.Encode(issuer)
	if err != nil {
		t.Fatalf("encoding account JWT %s: %v", name, err)
	}
	return &Account{Name: name, Key: kp, PublicKey: pub, JWT: token, Seed: seed}
}

// SystemSigningKey makes a new signing key of the system account: its
// public key and seed, and the system account JWT that lists it (signed by
// the same issuer as f.System.JWT).
func (f *Fixture) SystemSigningKey(t testing.TB) (pub string, seed []byte, systemJWT string) {
	t.Helper()
	sk := must(t, nkeys.CreateAccount)
	pub, _ = sk.PublicKey()
	seed, _ = sk.Seed()
	ac, err := jwt.DecodeAccountClaims(f.System.JWT)
	if err != nil {
		t.Fatalf("decoding the system account JWT: %v", err)
	}
	ac.SigningKeys.Add(pub)
	issuer := f.SigningKey
	if f.identityIssuer {
		issuer = f.Operator
	}
	if systemJWT, err = ac.Encode(issuer); err != nil {
		t.Fatalf("encoding the system account JWT: %v", err)
	}
	return pub, seed, systemJWT
}

// Reissued is the account with a new JWT under the same key: its claims
// with tag added, signed by the same issuer (an account's claims changed).
func (f *Fixture) Reissued(t testing.TB, a *Account, tag string) *Account {
	t.Helper()
	ac, err := jwt.DecodeAccountClaims(a.JWT)
	if err != nil {
		t.Fatalf("decoding account JWT %s: %v", a.Name, err)
	}
	ac.Tags.Add(tag)
	issuer := f.SigningKey
	if f.identityIssuer {
		issuer = f.Operator
	}
	token, err := ac.Encode(issuer)
	if err != nil {
		t.Fatalf("encoding account JWT %s: %v", a.Name, err)
	}
	b := *a
	b.JWT = token
	return &b
}

// UserCreds issues a user of the account and returns its creds file.
func (a *Account) UserCreds(t testing.TB, name string) []byte {
	t.Helper()
	ukp := must(t, nkeys.CreateUser)
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	token, err := uc.Encode(a.Key)
	if err != nil {
		t.Fatalf("encoding user JWT %s: %v", name, err)
	}
	creds, err := jwt.FormatUserConfig(token, useed)
	if err != nil {
		t.Fatalf("formatting creds of %s: %v", name, err)
	}
	return creds
}

// Trust is the render input for the fixture, with every account of
// f.Accounts.
func (f *Fixture) Trust() *render.Trust {
	tr := &render.Trust{OperatorJWT: f.OperatorJWT, SystemAccountJWT: f.System.JWT}
	for _, a := range f.Accounts {
		tr.Accounts = append(tr.Accounts, render.AccountTrust{Name: a.Name, PublicKey: a.PublicKey, JWT: a.JWT})
	}
	return tr
}

// OperatorTrust is the fixture as a NatsOperatorTrust.
func (f *Fixture) OperatorTrust(namespace, name string) *trustv1beta1.NatsOperatorTrust {
	return &trustv1beta1.NatsOperatorTrust{
		TypeMeta:   metav1.TypeMeta{APIVersion: trustv1beta1.SchemeGroupVersion.String(), Kind: "NatsOperatorTrust"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       trustv1beta1.NatsOperatorTrustSpec{OperatorJWT: f.OperatorJWT, SystemAccountJWT: f.System.JWT},
	}
}

// AccountTrusts are f.Accounts as NatsAccountTrusts named after them.
func (f *Fixture) AccountTrusts(namespace string) []*trustv1beta1.NatsAccountTrust {
	var out []*trustv1beta1.NatsAccountTrust
	for _, a := range f.Accounts {
		out = append(out, &trustv1beta1.NatsAccountTrust{
			TypeMeta:   metav1.TypeMeta{APIVersion: trustv1beta1.SchemeGroupVersion.String(), Kind: "NatsAccountTrust"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: a.Name},
			Spec:       trustv1beta1.NatsAccountTrustSpec{PublicKey: a.PublicKey, JWT: a.JWT},
		})
	}
	return out
}

func must(t testing.TB, create func() (nkeys.KeyPair, error)) nkeys.KeyPair {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatalf("creating nkey: %v", err)
	}
	return kp
}
