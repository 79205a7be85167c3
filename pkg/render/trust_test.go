package render_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func TestInvalidTrustIsRefusedWithTheFailedCheck(t *testing.T) {
	good := rt.NewTrust(t, rt.WithAccounts("orders", "events"))
	other := rt.NewTrust(t, rt.WithAccounts("stranger"))
	userJWT, err := jwt.ParseDecoratedJWT(good.Accounts[0].UserCreds(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}

	// An operator that requires signing keys, with an account issued by its
	// identity key.
	strictOp, _ := nkeys.CreateOperator()
	strictSK, _ := nkeys.CreateOperator()
	strictOpPub, _ := strictOp.PublicKey()
	strictSKPub, _ := strictSK.PublicKey()
	oc := jwt.NewOperatorClaims(strictOpPub)
	oc.SigningKeys.Add(strictSKPub)
	oc.StrictSigningKeyUsage = true
	oc.SystemAccount = good.System.PublicKey // re-issued below with the signing key
	strictOpJWT, err := oc.Encode(strictOp)
	if err != nil {
		t.Fatal(err)
	}
	sysClaims, err := jwt.DecodeAccountClaims(good.System.JWT)
	if err != nil {
		t.Fatal(err)
	}
	strictSysJWT, err := sysClaims.Encode(strictSK)
	if err != nil {
		t.Fatal(err)
	}
	accClaims, err := jwt.DecodeAccountClaims(good.Accounts[0].JWT)
	if err != nil {
		t.Fatal(err)
	}
	identityIssuedJWT, err := accClaims.Encode(strictOp)
	if err != nil {
		t.Fatal(err)
	}

	namingOther := func() string {
		opPub, _ := good.Operator.PublicKey()
		c := jwt.NewOperatorClaims(opPub)
		skPub, _ := good.SigningKey.PublicKey()
		c.SigningKeys.Add(skPub)
		c.SystemAccount = good.Accounts[1].PublicKey
		s, err := c.Encode(good.Operator)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	tampered := func(s string) string {
		parts := strings.Split(s, ".")
		sig := []byte(parts[2])
		if sig[0] == 'A' {
			sig[0] = 'B'
		} else {
			sig[0] = 'A'
		}
		return parts[0] + "." + parts[1] + "." + string(sig)
	}

	tests := []struct {
		name       string
		refs       []string // accountTrustRefs
		trust      func() *render.Trust
		wantReason string
		wantCheck  string
		wantObject string
	}{
		{
			name:       "an operator JWT that is not a JWT",
			trust:      func() *render.Trust { tr := good.Trust(); tr.OperatorJWT = "not a jwt"; return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckOperatorJWTDecodes, wantObject: "trust",
		},
		{
			name:       "an operator JWT whose signature does not verify",
			trust:      func() *render.Trust { tr := good.Trust(); tr.OperatorJWT = tampered(tr.OperatorJWT); return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckOperatorJWTDecodes, wantObject: "trust",
		},
		{
			name:       "an account JWT given as the operator JWT",
			trust:      func() *render.Trust { tr := good.Trust(); tr.OperatorJWT = good.System.JWT; return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckOperatorJWTIsOperator, wantObject: "trust",
		},
		{
			name:       "a system account JWT that is not a JWT",
			trust:      func() *render.Trust { tr := good.Trust(); tr.SystemAccountJWT = "eyJhbGciOi.broken"; return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckSystemAccountJWTDecodes, wantObject: "trust",
		},
		{
			name:       "an operator JWT given as the system account JWT",
			trust:      func() *render.Trust { tr := good.Trust(); tr.SystemAccountJWT = good.OperatorJWT; return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckSystemAccountJWTIsAccount, wantObject: "trust",
		},
		{
			name:       "a system account issued by another operator",
			trust:      func() *render.Trust { tr := good.Trust(); tr.SystemAccountJWT = other.System.JWT; return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckSystemAccountIssuedByOp, wantObject: "trust",
		},
		{
			name:       "an operator naming a different system account",
			trust:      func() *render.Trust { tr := good.Trust(); tr.OperatorJWT = namingOther; return tr },
			wantReason: clusterv1beta1.ReasonTrustInvalid, wantCheck: render.CheckSystemAccountNamedByOp, wantObject: "trust",
		},
		{
			name:       "no trust resolved for spec.auth",
			trust:      func() *render.Trust { return nil },
			wantReason: clusterv1beta1.ReasonTrustNotFound, wantCheck: render.CheckTrustProvided, wantObject: "trust",
		},
		{
			name: "an account trust whose subject differs from its public key",
			refs: []string{"orders"},
			trust: func() *render.Trust {
				tr := good.Trust()
				tr.Accounts[0].PublicKey = good.Accounts[1].PublicKey
				return tr
			},
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountSubjectIsPublicKey, wantObject: "orders",
		},
		{
			name: "an account issued by a key the operator does not trust",
			refs: []string{"stranger"},
			trust: func() *render.Trust {
				tr := good.Trust()
				a := other.Accounts[0]
				tr.Accounts = []render.AccountTrust{{Name: "stranger", PublicKey: a.PublicKey, JWT: a.JWT}}
				return tr
			},
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountIssuedByOperator, wantObject: "stranger",
		},
		{
			name: "an account issued by the identity key of an operator that requires signing keys",
			refs: []string{"orders"},
			trust: func() *render.Trust {
				return &render.Trust{OperatorJWT: strictOpJWT, SystemAccountJWT: strictSysJWT, Accounts: []render.AccountTrust{
					{Name: "orders", PublicKey: good.Accounts[0].PublicKey, JWT: identityIssuedJWT},
				}}
			},
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountIssuedByOperator, wantObject: "orders",
		},
		{
			name: "an account trust whose public key is not an account key",
			refs: []string{"orders"},
			trust: func() *render.Trust {
				tr := good.Trust()
				tr.Accounts[0].PublicKey, _ = good.Operator.PublicKey()
				return tr
			},
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountPublicKeyValid, wantObject: "orders",
		},
		{
			name:       "an account trust whose JWT is not a JWT",
			refs:       []string{"orders", "events"},
			trust:      func() *render.Trust { tr := good.Trust(); tr.Accounts[1].JWT = "garbage"; return tr },
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountJWTDecodes, wantObject: "events",
		},
		{
			name:       "a user JWT given as an account trust's JWT",
			refs:       []string{"orders"},
			trust:      func() *render.Trust { tr := good.Trust(); tr.Accounts[0].JWT = userJWT; return tr },
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountJWTIsAccount, wantObject: "orders",
		},
		{
			name:       "a referenced account trust that was not resolved",
			refs:       []string{"orders", "missing"},
			trust:      good.Trust,
			wantReason: clusterv1beta1.ReasonAccountTrustNotFound, wantCheck: render.CheckAccountTrustProvided, wantObject: "missing",
		},
		{
			name: "the system account preloaded again as an account trust",
			refs: []string{"sys-again"},
			trust: func() *render.Trust {
				tr := good.Trust()
				tr.Accounts = []render.AccountTrust{{Name: "sys-again", PublicKey: good.System.PublicKey, JWT: good.System.JWT}}
				return tr
			},
			wantReason: clusterv1beta1.ReasonAccountTrustInvalid, wantCheck: render.CheckAccountPreloadedOnce, wantObject: "sys-again",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := rt.NewCluster("ns", "demo", rt.Auth("trust", tt.refs...))
			out, err := render.Render(render.Input{Cluster: nc, Trust: tt.trust()})
			if out != nil {
				t.Errorf("Render returned objects along with an error")
			}
			var te *render.TrustError
			if !errors.As(err, &te) {
				t.Fatalf("Render error = %v, want a *TrustError", err)
			}
			if te.Reason != tt.wantReason || te.Check != tt.wantCheck || te.Object != tt.wantObject {
				t.Errorf("TrustError{Reason: %s, Check: %s, Object: %s}, want {%s, %s, %s}; message: %s",
					te.Reason, te.Check, te.Object, tt.wantReason, tt.wantCheck, tt.wantObject, te.Message)
			}
			if !strings.Contains(te.Message, tt.wantCheck) || !strings.Contains(te.Message, tt.wantObject) {
				t.Errorf("message %q does not name the check %s and the object %s", te.Message, tt.wantCheck, tt.wantObject)
			}
		})
	}
}

func TestTrustErrorMessages(t *testing.T) {
	good := rt.NewTrust(t)
	other := rt.NewTrust(t)
	opKey, _ := good.Operator.PublicKey()
	otherKey, _ := other.SigningKey.PublicKey()
	tr := good.Trust()
	tr.SystemAccountJWT = other.System.JWT
	_, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.Auth("demo-trust")), Trust: tr})
	want := "NatsOperatorTrust demo-trust: check SystemAccountIssuedByOperator failed: system account " + other.System.PublicKey +
		" is issued by " + otherKey + ", which is neither the NATS operator's identity key " + opKey + " nor one of its 1 signing keys"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

func TestValidTrustRendersOperatorMode(t *testing.T) {
	f := rt.NewTrust(t, rt.WithAccounts("orders"), rt.WithIdentityIssuer(), rt.WithoutSystemAccountInOperator())
	out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.Auth("t", "orders")), Trust: f.Trust()})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	opKey, _ := f.Operator.PublicKey()
	if want := (render.AuthMode{Operator: opKey, SystemAccount: f.System.PublicKey}); out.Auth != want {
		t.Errorf("Auth = %+v, want %+v", out.Auth, want)
	}
	for _, s := range out.Servers {
		for _, key := range []string{f.System.PublicKey, f.Accounts[0].PublicKey} {
			if !strings.Contains(string(s.Config), `"`+key+`": "`) {
				t.Errorf("%s does not preload %s", s.Name, key)
			}
		}
	}
}

func TestTrustWithoutAuthIsAnError(t *testing.T) {
	_, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo"), Trust: rt.NewTrust(t).Trust()})
	var te *render.TrustError
	if err == nil || errors.As(err, &te) {
		t.Errorf("Render error = %v, want a plain error", err)
	}
}

// The validity window of every JWT of the trust is checked at Input.Now:
// past exp or before nbf is TrustInvalid (AccountTrustInvalid for an
// account) with check JWTCurrent; expiring within 7 days renders, with a
// warning in Output.TrustExpiring.
func TestTrustJWTsAreCheckedAtTheTimeOfTheRender(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	nc := rt.NewCluster("ns", "demo", rt.Auth("demo", "orders"))
	reissue := func(t *testing.T, f *rt.Fixture, token string, edit func(*jwt.ClaimsData)) string {
		t.Helper()
		c, err := jwt.DecodeAccountClaims(token)
		if err != nil {
			t.Fatal(err)
		}
		edit(&c.ClaimsData)
		out, err := c.Encode(f.SigningKey)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		edit    func(f *rt.Fixture, tr *render.Trust)
		reason  string
		message string
		warning string
	}{
		{name: "an account JWT past its expiry", reason: clusterv1beta1.ReasonAccountTrustInvalid,
			edit: func(f *rt.Fixture, tr *render.Trust) {
				tr.Accounts[0].JWT = reissue(t, f, tr.Accounts[0].JWT, func(c *jwt.ClaimsData) { c.Expires = now.Add(-time.Hour).Unix() })
			},
			message: "NatsAccountTrust orders: check JWTCurrent failed: spec.jwt expired at 2026-12-03T11:00:00Z (exp): issue a new one; nats-server does not trust an expired JWT"},
		{name: "a system account JWT not valid yet", reason: clusterv1beta1.ReasonTrustInvalid,
			edit: func(f *rt.Fixture, tr *render.Trust) {
				tr.SystemAccountJWT = reissue(t, f, tr.SystemAccountJWT, func(c *jwt.ClaimsData) { c.NotBefore = now.Add(48 * time.Hour).Unix() })
			},
			message: "NatsOperatorTrust demo: check JWTCurrent failed: spec.systemAccountJWT is not valid before 2026-12-05T12:00:00Z (nbf): apply it then, or issue one valid now"},
		{name: "an account JWT expiring in 4 days renders with a warning",
			edit: func(f *rt.Fixture, tr *render.Trust) {
				tr.Accounts[0].JWT = reissue(t, f, tr.Accounts[0].JWT, func(c *jwt.ClaimsData) { c.Expires = now.Add(96 * time.Hour).Unix() })
			},
			warning: "NatsAccountTrust orders: spec.jwt expires at 2026-12-07T12:00:00Z, in 96h0m0s: issue a new one before then"},
		{name: "an account JWT expiring in 8 days renders without one",
			edit: func(f *rt.Fixture, tr *render.Trust) {
				tr.Accounts[0].JWT = reissue(t, f, tr.Accounts[0].JWT, func(c *jwt.ClaimsData) { c.Expires = now.Add(8 * 24 * time.Hour).Unix() })
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rt.NewTrust(t, rt.WithAccounts("orders"))
			tr := f.Trust()
			tc.edit(f, tr)
			out, err := render.Render(render.Input{Cluster: nc, Trust: tr, Now: now})
			if tc.reason != "" {
				var te *render.TrustError
				if !errors.As(err, &te) || te.Reason != tc.reason || te.Check != render.CheckJWTCurrent || te.Message != tc.message {
					t.Fatalf("Render = %v (%+v); want %s %s %q", err, te, tc.reason, render.CheckJWTCurrent, tc.message)
				}
				// Without a time, the window is not checked.
				if _, err := render.Render(render.Input{Cluster: nc, Trust: tr}); err != nil {
					t.Errorf("Render without Now = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if tc.warning != "" {
				want = []string{tc.warning}
			}
			if !slices.Equal(out.TrustExpiring, want) {
				t.Errorf("TrustExpiring = %q; want %q", out.TrustExpiring, want)
			}
		})
	}
}
