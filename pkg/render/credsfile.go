package render

import (
	"errors"

	"github.com/nats-io/jwt/v2"
)

// CheckCredsFile says why creds is not a NATS creds file a server can
// connect with: a user JWT that decodes and whose signature verifies, and
// the nkey seed of that user. The controller copies a leaf remote's creds
// file into a Secret the servers' config volume projects only when it is
// one, since the field may name any key of any Secret of the namespace.
// The error never quotes the bytes, only what is missing.
func CheckCredsFile(creds []byte) error {
	// ParseDecoratedJWT returns the whole file when it holds no JWT block,
	// which then does not decode.
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return errors.New("it holds no user JWT")
	}
	claims, err := jwt.Decode(token)
	if err != nil {
		return errors.New("it holds no user JWT that decodes and whose signature verifies (a creds file is a user JWT and the user's nkey seed, each between -----BEGIN and ------END lines, as nsc generate creds writes it)")
	}
	uc, ok := claims.(*jwt.UserClaims)
	if !ok {
		return errors.New("its JWT is not a user JWT (an operator's or an account's JWT is no creds file)")
	}
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	if err != nil {
		return errors.New("it holds no user nkey seed (SU...)")
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || pub != uc.Subject {
		return errors.New("its nkey seed is not the key of the user its JWT is for")
	}
	return nil
}
