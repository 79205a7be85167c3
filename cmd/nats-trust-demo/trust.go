package main

import (
	"fmt"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Chain is a NATS trust chain: a NATS operator, its system account and an
// application account, each with one user.
type Chain struct {
	// OperatorJWT is the NATS operator JWT, self-signed, naming
	// SystemAccountPublicKey as its system account and carrying one signing
	// key, which signs both accounts.
	OperatorJWT string
	// SystemAccountPublicKey and SystemAccountJWT are the system account.
	SystemAccountPublicKey string
	SystemAccountJWT       string
	// AppAccountPublicKey and AppAccountJWT are the application account,
	// with JetStream enabled.
	AppAccountPublicKey string
	AppAccountJWT       string
	// SystemUserCreds and AppUserCreds are creds files (user JWT and seed)
	// of a user of each account. They are secret.
	SystemUserCreds []byte
	AppUserCreds    []byte
}

// NewChain makes a new trust chain with fresh keys; name labels the NATS
// operator and the accounts' names.
func NewChain(name string) (*Chain, error) {
	operator, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	signer, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	signerPub, err := signer.PublicKey()
	if err != nil {
		return nil, err
	}
	sys, sysPub, err := newAccount()
	if err != nil {
		return nil, err
	}
	app, appPub, err := newAccount()
	if err != nil {
		return nil, err
	}

	c := &Chain{SystemAccountPublicKey: sysPub, AppAccountPublicKey: appPub}

	operatorPub, err := operator.PublicKey()
	if err != nil {
		return nil, err
	}
	oc := jwt.NewOperatorClaims(operatorPub)
	oc.Name = name
	oc.SigningKeys.Add(signerPub)
	oc.SystemAccount = sysPub
	if c.OperatorJWT, err = oc.Encode(operator); err != nil {
		return nil, fmt.Errorf("signing the NATS operator JWT: %w", err)
	}

	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = "SYS"
	if c.SystemAccountJWT, err = sc.Encode(signer); err != nil {
		return nil, fmt.Errorf("signing the system account JWT: %w", err)
	}

	ac := jwt.NewAccountClaims(appPub)
	ac.Name = "app"
	ac.Limits.JetStreamLimits.MemoryStorage = jwt.NoLimit
	ac.Limits.JetStreamLimits.DiskStorage = jwt.NoLimit
	ac.Limits.JetStreamLimits.Streams = jwt.NoLimit
	ac.Limits.JetStreamLimits.Consumer = jwt.NoLimit
	if c.AppAccountJWT, err = ac.Encode(signer); err != nil {
		return nil, fmt.Errorf("signing the app account JWT: %w", err)
	}

	if c.SystemUserCreds, err = newUserCreds(sys, name+"-system"); err != nil {
		return nil, err
	}
	if c.AppUserCreds, err = newUserCreds(app, name+"-app"); err != nil {
		return nil, err
	}
	return c, nil
}

func newAccount() (nkeys.KeyPair, string, error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, "", err
	}
	pub, err := kp.PublicKey()
	return kp, pub, err
}

// newUserCreds makes a user of the account signed by account and returns
// its creds file.
func newUserCreds(account nkeys.KeyPair, name string) ([]byte, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	userPub, err := user.PublicKey()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(userPub)
	uc.Name = name
	userJWT, err := uc.Encode(account)
	if err != nil {
		return nil, fmt.Errorf("signing user %s: %w", name, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(userJWT, seed)
}
