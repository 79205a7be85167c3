package render

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Trust is the resolved trust of a NatsCluster with spec.auth: the
// NatsOperatorTrust named by trustRef and the NatsAccountTrusts named by
// accountTrustRefs.
type Trust struct {
	// OperatorJWT is the NATS operator JWT (NatsOperatorTrust spec.operatorJWT).
	OperatorJWT string
	// SystemAccountJWT is the system account's JWT (spec.systemAccountJWT).
	SystemAccountJWT string
	// Accounts are the NatsAccountTrusts of spec.auth.accountTrustRefs, in
	// any order; every reference must have one.
	Accounts []AccountTrust
}

// AccountTrust is one resolved NatsAccountTrust.
type AccountTrust struct {
	// Name of the NatsAccountTrust.
	Name string
	// PublicKey is its spec.publicKey.
	PublicKey string
	// JWT is its spec.jwt.
	JWT string
}

// Checks of trust validation, in the order they run; the first failure wins
// and is TrustError.Check.
const (
	CheckTrustProvided             = "TrustProvided"
	CheckOperatorJWTDecodes        = "OperatorJWTDecodes"
	CheckOperatorJWTIsOperator     = "OperatorJWTIsOperator"
	CheckSystemAccountJWTDecodes   = "SystemAccountJWTDecodes"
	CheckSystemAccountJWTIsAccount = "SystemAccountJWTIsAccount"
	CheckSystemAccountIssuedByOp   = "SystemAccountIssuedByOperator"
	CheckSystemAccountNamedByOp    = "SystemAccountNamedByOperator"
	CheckAccountTrustProvided      = "AccountTrustProvided"
	CheckAccountPublicKeyValid     = "AccountPublicKeyValid"
	CheckAccountJWTDecodes         = "AccountJWTDecodes"
	CheckAccountJWTIsAccount       = "AccountJWTIsAccount"
	CheckAccountSubjectIsPublicKey = "AccountSubjectIsPublicKey"
	CheckAccountIssuedByOperator   = "AccountIssuedByOperator"
	CheckAccountPreloadedOnce      = "AccountPreloadedOnce"
	// CheckJWTCurrent runs on every JWT of the trust as it is decoded: not
	// past its expiry (exp), not before its start (nbf), at Input.Now.
	CheckJWTCurrent = "JWTCurrent"
)

// TrustExpiresWithin is how soon a JWT of the trust must expire for the
// render to warn (Output.TrustExpiring).
const TrustExpiresWithin = 7 * 24 * time.Hour

// jwtTimes checks one JWT's validity window at now (zero: not checked). It
// returns the failure for CheckJWTCurrent, or a warning when it expires
// within TrustExpiresWithin, each to follow the JWT's name.
func jwtTimes(c jwt.Claims, now time.Time) (problem, warning string) {
	if now.IsZero() {
		return "", ""
	}
	cd := c.Claims()
	at := func(unix int64) string { return time.Unix(unix, 0).UTC().Format(time.RFC3339) }
	switch {
	case cd.Expires > 0 && now.Unix() >= cd.Expires:
		return fmt.Sprintf("expired at %s (exp): issue a new one; nats-server does not trust an expired JWT", at(cd.Expires)), ""
	case cd.NotBefore > 0 && now.Unix() < cd.NotBefore:
		return fmt.Sprintf("is not valid before %s (nbf): apply it then, or issue one valid now", at(cd.NotBefore)), ""
	case cd.Expires > 0 && time.Unix(cd.Expires, 0).Sub(now) < TrustExpiresWithin:
		left := time.Unix(cd.Expires, 0).Sub(now).Round(time.Hour)
		return "", fmt.Sprintf("expires at %s, in %s: issue a new one before then", at(cd.Expires), left)
	}
	return "", ""
}

// TrustError is a trust that cannot be rendered. The controller turns it
// into Progressing=False with Reason and Message; nothing was rendered.
type TrustError struct {
	// Reason is clusterv1beta1.ReasonTrustInvalid, ReasonAccountTrustInvalid,
	// ReasonTrustNotFound or ReasonAccountTrustNotFound.
	Reason string
	// Check is the failed check, one of the Check* constants.
	Check string
	// Object is the name of the NatsOperatorTrust or NatsAccountTrust at
	// fault.
	Object string
	// Message says what failed, starting with the object and check.
	Message string
}

func (e *TrustError) Error() string { return e.Message }

func trustErr(reason, kind, object, check, format string, args ...any) *TrustError {
	return &TrustError{
		Reason:  reason,
		Check:   check,
		Object:  object,
		Message: fmt.Sprintf("%s %s: check %s failed: %s", kind, object, check, fmt.Sprintf(format, args...)),
	}
}

// validTrust is a trust that passed every check.
type validTrust struct {
	operatorKey   string
	systemAccount string
	// preload maps account public keys to their JWTs, the system account
	// included.
	preload map[string]string
	// expiring are the warnings of JWTs that expire soon (jwtTimes).
	expiring []string
}

// validateTrust runs the trust checks in order at now. auth is spec.auth
// (not nil).
func validateTrust(auth *clusterv1beta1.AuthSpec, t *Trust, now time.Time) (*validTrust, error) {
	var expiring []string
	const opKind, accKind = "NatsOperatorTrust", "NatsAccountTrust"
	opName := auth.TrustRef.Name
	opErr := func(check, format string, args ...any) *TrustError {
		return trustErr(clusterv1beta1.ReasonTrustInvalid, opKind, opName, check, format, args...)
	}
	if t == nil {
		return nil, trustErr(clusterv1beta1.ReasonTrustNotFound, opKind, opName, CheckTrustProvided,
			"spec.auth names it but no trust was resolved")
	}

	claims, err := jwt.Decode(t.OperatorJWT)
	if err != nil {
		return nil, opErr(CheckOperatorJWTDecodes, "spec.operatorJWT does not decode as a signed JWT: %v", err)
	}
	op, ok := claims.(*jwt.OperatorClaims)
	if !ok {
		return nil, opErr(CheckOperatorJWTIsOperator, "spec.operatorJWT is a %s JWT, not an operator JWT", claimKind(claims))
	}
	if !nkeys.IsValidPublicOperatorKey(op.Subject) {
		return nil, opErr(CheckOperatorJWTIsOperator, "spec.operatorJWT subject %q is not an operator public key", op.Subject)
	}
	if problem, warning := jwtTimes(op, now); problem != "" {
		return nil, opErr(CheckJWTCurrent, "spec.operatorJWT %s", problem)
	} else if warning != "" {
		expiring = append(expiring, opKind+" "+opName+": spec.operatorJWT "+warning)
	}

	claims, err = jwt.Decode(t.SystemAccountJWT)
	if err != nil {
		return nil, opErr(CheckSystemAccountJWTDecodes, "spec.systemAccountJWT does not decode as a signed JWT: %v", err)
	}
	sys, ok := claims.(*jwt.AccountClaims)
	if !ok {
		return nil, opErr(CheckSystemAccountJWTIsAccount, "spec.systemAccountJWT is a %s JWT, not an account JWT", claimKind(claims))
	}
	if problem, warning := jwtTimes(sys, now); problem != "" {
		return nil, opErr(CheckJWTCurrent, "spec.systemAccountJWT %s", problem)
	} else if warning != "" {
		expiring = append(expiring, opKind+" "+opName+": spec.systemAccountJWT "+warning)
	}
	if msg := issuerProblem(op, sys); msg != "" {
		return nil, opErr(CheckSystemAccountIssuedByOp, "system account %s %s", sys.Subject, msg)
	}
	if op.SystemAccount != "" && op.SystemAccount != sys.Subject {
		return nil, opErr(CheckSystemAccountNamedByOp,
			"the operator JWT names system account %s but spec.systemAccountJWT is account %s", op.SystemAccount, sys.Subject)
	}

	v := &validTrust{
		operatorKey:   op.Subject,
		systemAccount: sys.Subject,
		preload:       map[string]string{sys.Subject: t.SystemAccountJWT},
	}

	byName := make(map[string]AccountTrust, len(t.Accounts))
	for _, a := range t.Accounts {
		byName[a.Name] = a
	}
	refs := make([]string, 0, len(auth.AccountTrustRefs))
	for _, r := range auth.AccountTrustRefs {
		refs = append(refs, r.Name)
	}
	for _, a := range t.Accounts {
		if !slices.Contains(refs, a.Name) {
			refs = append(refs, a.Name)
		}
	}
	seen := map[string]string{sys.Subject: opKind + " " + opName + " (the system account)"}
	for _, name := range refs {
		accErr := func(check, format string, args ...any) *TrustError {
			return trustErr(clusterv1beta1.ReasonAccountTrustInvalid, accKind, name, check, format, args...)
		}
		a, ok := byName[name]
		if !ok {
			return nil, trustErr(clusterv1beta1.ReasonAccountTrustNotFound, accKind, name, CheckAccountTrustProvided,
				"spec.auth.accountTrustRefs names it but it was not resolved")
		}
		if !nkeys.IsValidPublicAccountKey(a.PublicKey) {
			return nil, accErr(CheckAccountPublicKeyValid, "spec.publicKey %q is not an account public key", a.PublicKey)
		}
		claims, err := jwt.Decode(a.JWT)
		if err != nil {
			return nil, accErr(CheckAccountJWTDecodes, "spec.jwt does not decode as a signed JWT: %v", err)
		}
		acc, ok := claims.(*jwt.AccountClaims)
		if !ok {
			return nil, accErr(CheckAccountJWTIsAccount, "spec.jwt is a %s JWT, not an account JWT", claimKind(claims))
		}
		if problem, warning := jwtTimes(acc, now); problem != "" {
			return nil, accErr(CheckJWTCurrent, "spec.jwt %s", problem)
		} else if warning != "" {
			expiring = append(expiring, accKind+" "+name+": spec.jwt "+warning)
		}
		if acc.Subject != a.PublicKey {
			return nil, accErr(CheckAccountSubjectIsPublicKey,
				"spec.jwt is the JWT of account %s, not of spec.publicKey %s", acc.Subject, a.PublicKey)
		}
		if msg := issuerProblem(op, acc); msg != "" {
			return nil, accErr(CheckAccountIssuedByOperator, "account %s %s", acc.Subject, msg)
		}
		if prev, dup := seen[acc.Subject]; dup {
			return nil, accErr(CheckAccountPreloadedOnce, "account %s is already preloaded from %s", acc.Subject, prev)
		}
		seen[acc.Subject] = accKind + " " + name
		v.preload[acc.Subject] = a.JWT
	}
	v.expiring = expiring
	return v, nil
}

// issuerProblem says why the operator does not trust the account's issuer,
// or "" when it does.
func issuerProblem(op *jwt.OperatorClaims, acc *jwt.AccountClaims) string {
	switch {
	case acc.Issuer == op.Subject && op.StrictSigningKeyUsage:
		return fmt.Sprintf("is issued by the NATS operator's identity key %s, but the operator requires signing keys (strict signing key usage)", op.Subject)
	case acc.Issuer == op.Subject, op.SigningKeys.Contains(acc.Issuer):
		return ""
	default:
		return fmt.Sprintf("is issued by %s, which is neither the NATS operator's identity key %s nor one of its %d signing keys",
			acc.Issuer, op.Subject, len(op.SigningKeys))
	}
}

func claimKind(c jwt.Claims) string {
	switch c.(type) {
	case *jwt.OperatorClaims:
		return "operator"
	case *jwt.AccountClaims:
		return "account"
	case *jwt.UserClaims:
		return "user"
	case *jwt.ActivationClaims:
		return "activation"
	default:
		return string(c.ClaimType())
	}
}
