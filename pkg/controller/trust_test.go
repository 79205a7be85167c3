package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A cluster whose account JWT expires within 7 days is created as usual,
// with TrustCurrent=False JWTExpiresSoon naming it and one Warning Event;
// the same account JWT already expired holds with AccountTrustInvalid and
// creates nothing. The expiry is set relative to the clock the sync reads.
func TestAJWTThatExpiresSoonIsAWarningAndAnExpiredOneAHold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn time.Duration
		reason    string // Progressing's
		created   bool
	}{
		{"expiring in 3 days", 72 * time.Hour, clusterv1beta1.ReasonCreating, true},
		{"expired an hour ago", -time.Hour, clusterv1beta1.ReasonAccountTrustInvalid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trust := rt.NewTrust(t, rt.WithAccounts("orders"))
			c, err := jwt.DecodeAccountClaims(trust.Accounts[0].JWT)
			if err != nil {
				t.Fatal(err)
			}
			c.Expires = time.Now().Add(tc.expiresIn).Unix()
			if trust.Accounts[0].JWT, err = c.Encode(trust.SigningKey); err != nil {
				t.Fatal(err)
			}
			nc := rt.NewCluster("ns", "demo", rt.Auth("demo", "orders"))
			creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-sys"},
				Data: map[string][]byte{"user.creds": trust.System.UserCreds(t, "sys")}}
			f := newFixture(t, nc, creds)
			f.natsObjects = append(f.natsObjects, trust.OperatorTrust("ns", "demo"))
			for _, at := range trust.AccountTrusts("ns") {
				f.natsObjects = append(f.natsObjects, at)
			}
			acts := f.sync()
			st := writtenStatus(acts)
			if st == nil {
				t.Fatal("no status written")
			}
			if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != tc.reason {
				t.Fatalf("Progressing = %+v; want %s", p, tc.reason)
			}
			created := strings.Contains(strings.Join(describe(acts), ","), "create statefulsets demo-0")
			if created != tc.created {
				t.Errorf("created demo-0: %v, want %v (%v)", created, tc.created, describe(acts))
			}
			tcond := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionTrustCurrent)
			if !tc.created {
				if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); !strings.Contains(p.Message, "check JWTCurrent failed: spec.jwt expired at") {
					t.Errorf("Progressing message: %s", p.Message)
				}
				return
			}
			if tcond == nil || tcond.Status != metav1.ConditionFalse || tcond.Reason != clusterv1beta1.ReasonJWTExpiresSoon ||
				!strings.HasPrefix(tcond.Message, "NatsAccountTrust orders: spec.jwt expires at ") {
				t.Fatalf("TrustCurrent = %+v; want False JWTExpiresSoon naming NatsAccountTrust orders", tcond)
			}
			var warned int
			for _, e := range events(f.recorder) {
				if strings.HasPrefix(e, "Warning "+clusterv1beta1.ReasonJWTExpiresSoon+" ") {
					warned++
				}
			}
			if warned != 1 {
				t.Errorf("%d JWTExpiresSoon Events, want 1", warned)
			}
		})
	}
}

// With only the trust's signing key, the sync that mints the controller's
// system user looks again by the time it is due (the last third of its
// lifetime), whatever else happens: the renewal waits for no event.
func TestTheMintedSystemUserIsRenewedOnTime(t *testing.T) {
	trust := rt.NewTrust(t, rt.WithAccounts("orders"))
	_, skSeed, systemJWT := trust.SystemSigningKey(t)
	ot := trust.OperatorTrust("ns", "demo")
	ot.Spec.SystemAccountJWT = systemJWT
	ot.Spec.SystemAccountSigningKey = &trustv1beta1.SecretKeySelector{Name: "sys-signing"}
	nc := rt.NewCluster("ns", "demo", rt.Auth("demo", "orders"))
	nc.Spec.Auth.SystemCredentials = nil
	f := newFixture(t, nc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sys-signing"}, Data: map[string][]byte{"seed": skSeed}})
	f.natsObjects = append(f.natsObjects, ot)
	for _, at := range trust.AccountTrusts("ns") {
		f.natsObjects = append(f.natsObjects, at)
	}
	// Shorter than any requeue the sync would ask for otherwise.
	f.systemUserLifetime = 15 * time.Second
	st := writtenStatus(f.sync())
	if a := st.Status.SystemAccess; a == nil || a.Via != clusterv1beta1.SystemAccessMintedUser {
		t.Fatalf("status.systemAccess %+v, want via MintedUser", a)
	}
	if due := f.systemUserLifetime * 2 / 3; f.requeue <= 0 || f.requeue > due {
		t.Errorf("the sync looks again in %s, want by %s (when the minted user is due)", f.requeue, due)
	}
}

func TestRenewBy(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		requeue time.Duration
		renew   time.Time
		want    time.Duration
	}{
		{DefaultRestRequeue, time.Time{}, DefaultRestRequeue},
		{DefaultRestRequeue, now.Add(20 * time.Second), 20 * time.Second},
		{time.Second, now.Add(20 * time.Second), time.Second},
		{DefaultRestRequeue, now.Add(-time.Minute), time.Second},
	} {
		if got := renewBy(c.requeue, c.renew, now); got != c.want {
			t.Errorf("renewBy(%s, renew in %s) = %s, want %s", c.requeue, c.renew.Sub(now), got, c.want)
		}
	}
}
