package render

import (
	"errors"
	"fmt"

	"github.com/nats-io/jwt/v2"
)

// CredsAccount is the account a creds file's user belongs to: the public
// key of the account that issued its JWT (its issuer_account when a
// signing key issued it). Only the JWT is read, never the seed.
func CredsAccount(creds []byte) (string, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return "", fmt.Errorf("reading the user JWT of the creds file: %w", err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", fmt.Errorf("decoding the user JWT of the creds file: %w", err)
	}
	if uc.IssuerAccount != "" {
		return uc.IssuerAccount, nil
	}
	if uc.Issuer == "" {
		return "", errors.New("the user JWT of the creds file names no issuer")
	}
	return uc.Issuer, nil
}
