package render

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"
)

// SystemUserName is the name of the controller's system user.
const SystemUserName = "nats-operator"

// SystemUser is the controller's user of the built-in system account ($SYS)
// for clusters without spec.auth: with it the controller sends the $SYS
// requests (config reload, peer removal) a client of the global account
// cannot. The password hash is bcrypt; the controller generates the password
// once and keeps it in a Secret, so the hash is stable across renders.
//
// With the block rendered, nats-server 2.15 still lets clients in without
// credentials, into the global account $G with its JetStream streams: when
// the only accounts are $G and $SYS and no authorization block exists, it
// adds a user of $G of its own as no_auth_user (server.go,
// sysAccOnlyNoAuthUser). /varz and the INFO clients see then say
// auth_required true, and a client that does send credentials other than
// the system user's is refused (Authorization Violation) where without the
// block its credentials were ignored.
//
// With NKey set the user is an nkey user instead ({nkey: U...}): the
// controller proves it holds the seed by signing the server's nonce, and
// nothing secret crosses the network (a password would, in clear without
// client TLS, to whatever server holds the address dialled).
type SystemUser struct {
	// Name is the user name, SystemUserName.
	Name string
	// PasswordHash is the bcrypt hash of the password ($2a$, $2b$ or $2y$);
	// rendered only without NKey.
	PasswordHash string
	// NKey is the public key of the user's nkey (U...); when set, the user
	// is rendered as this nkey user.
	NKey string
}

// accountsConfig is nats.conf's accounts block: only the built-in system
// account $SYS, with the controller's user. nats-server makes an account of
// that name the system account by itself, so the config does not name it in
// system_account: a reload that sets system_account on a server started
// without it is refused ("config reload not supported for SystemAccount:
// old=, new=$SYS", nats-server 2.15.2), and so would be adding the block.
type accountsConfig struct {
	System systemAccountConfig `json:"$SYS"`
}

type systemAccountConfig struct {
	Users []userConfig `json:"users"`
}

type userConfig struct {
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	NKey     string `json:"nkey,omitempty"`
}

// systemUserAccounts validates the system user and renders its accounts
// block; nil for a nil user. It is refused with spec.auth rather than
// ignored: in operator mode the system account and its users come from the
// trust (JWTs), and a controller passing one there has mixed up clusters.
func systemUserAccounts(u *SystemUser, auth bool) (*accountsConfig, error) {
	if u == nil {
		return nil, nil
	}
	if auth {
		return nil, errors.New("a system user was given but spec.auth is present: in operator mode the system account's users come from the trust")
	}
	if u.NKey != "" {
		if !nkeys.IsValidPublicUserKey(u.NKey) {
			return nil, errors.New("the nkey of the system user is not a user public key (U...)")
		}
		return &accountsConfig{System: systemAccountConfig{Users: []userConfig{{NKey: u.NKey}}}}, nil
	}
	if u.Name == "" {
		return nil, errors.New("the system user has no name")
	}
	if err := checkConfigString("system user name", u.Name); err != nil {
		return nil, err
	}
	if !isBcrypt(u.PasswordHash) {
		// The hash is not printed: a plaintext password may have been given.
		return nil, fmt.Errorf("the password of system user %q is not a bcrypt hash ($2a$, $2b$ or $2y$)", u.Name)
	}
	if err := checkConfigString("system user password hash", u.PasswordHash); err != nil {
		return nil, errors.New("the password hash of the system user contains a character nats.conf cannot hold")
	}
	return &accountsConfig{System: systemAccountConfig{Users: []userConfig{{User: u.Name, Password: u.PasswordHash}}}}, nil
}

// isBcrypt reports whether s looks like a bcrypt hash: a version prefix and
// the 60 characters every bcrypt hash has. nats-server takes any other
// password as plaintext.
func isBcrypt(s string) bool {
	if len(s) != 60 {
		return false
	}
	for _, p := range []string{"$2a$", "$2b$", "$2y$"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// SystemUserSeed encodes 32 random bytes (the caller's) as the seed of a
// user nkey (SU...), for the controller's system user.
func SystemUserSeed(raw []byte) ([]byte, error) {
	if len(raw) != 32 {
		return nil, fmt.Errorf("an nkey seed takes 32 random bytes, not %d", len(raw))
	}
	return nkeys.EncodeSeed(nkeys.PrefixByteUser, raw)
}

// SystemUserNKeyOf is the public key (U...) of a user nkey seed; the error
// never holds the seed.
func SystemUserNKeyOf(seed []byte) (string, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", errors.New("not an nkey seed")
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", errors.New("not the seed of a user nkey")
	}
	return pub, nil
}

// systemUserNKey reports whether the config's system user is an nkey user.
func (c *serverConfig) systemUserNKey() bool {
	return c.hasSystemUser() && c.Accounts.System.Users[0].NKey != ""
}

// hasSystemUser reports whether a config has the controller's system user.
func (c *serverConfig) hasSystemUser() bool {
	return c.Accounts != nil && len(c.Accounts.System.Users) > 0
}
