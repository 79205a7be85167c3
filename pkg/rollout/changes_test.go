package rollout

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// JetStream limits are raised only when both are set on either side and
// neither goes down; every other change of them is lowered, which restarts.
func TestJetStreamLimitsAreRaisedOnlyWhenBothAreSetAndNeitherGoesDown(t *testing.T) {
	const mi, gi = int64(1) << 20, int64(1) << 30
	limits := func(mem, file int64) ConfigFacts {
		f := baseFacts()
		f.MaxMemoryStore, f.MaxFileStore = mem, file
		return f
	}
	raised, lowered := []Change{{Kind: ChangeJetStreamLimitsRaised}}, []Change{{Kind: ChangeJetStreamLimitsLowered}}
	for _, tc := range []struct {
		name            string
		running, target ConfigFacts
		want            []Change
	}{
		{"both limits up are raised", limits(256*mi, gi), limits(512*mi, 2*gi), raised},
		{"one limit up, the other the same, is raised", limits(256*mi, gi), limits(256*mi, 2*gi), raised},
		{"both limits down are lowered", limits(512*mi, 2*gi), limits(256*mi, gi), lowered},
		{"one limit down, the other the same, is lowered", limits(512*mi, gi), limits(256*mi, gi), lowered},
		{"one limit up and the other down is lowered", limits(256*mi, 2*gi), limits(512*mi, gi), lowered},
		{"a limit set where nats-server picked its own is lowered", limits(0, gi), limits(256*mi, gi), lowered},
		{"a limit unset, so nats-server picks its own, is lowered even with the other up", limits(256*mi, gi), limits(0, 2*gi), lowered},
		{"the same limits are no change", limits(256*mi, gi), limits(256*mi, gi), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Classify(tc.running, tc.target)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}

// Another lame duck duration or grace period is one change kind, named with
// both settings on either side; it restarts the servers one at a time: it
// splits nothing (the settings are local to a server) and nats-server
// reloads neither.
func TestLameDuckSettingsAreOneChangeThatRestartsOneServerAtATime(t *testing.T) {
	lameDuck := func(duration, grace string) ConfigFacts {
		f := baseFacts()
		f.LameDuckDuration, f.LameDuckGracePeriod = duration, grace
		return f
	}
	for _, tc := range []struct {
		name            string
		running, target ConfigFacts
		want            []Change
	}{
		{"a shorter grace period", lameDuck("30s", "10s"), lameDuck("30s", "1s"),
			[]Change{{Kind: ChangeLameDuck, From: "duration 30s, grace period 10s", To: "duration 30s, grace period 1s"}}},
		{"a longer duration", lameDuck("30s", "10s"), lameDuck("1m0s", "10s"),
			[]Change{{Kind: ChangeLameDuck, From: "duration 30s, grace period 10s", To: "duration 1m0s, grace period 10s"}}},
		{"both at once are one change", lameDuck("30s", "10s"), lameDuck("45s", "1s"),
			[]Change{{Kind: ChangeLameDuck, From: "duration 30s, grace period 10s", To: "duration 45s, grace period 1s"}}},
		{"the same settings are no change", lameDuck("30s", "1s"), lameDuck("30s", "1s"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Classify(tc.running, tc.target)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
	if e := EffectOf(ChangeLameDuck); e.Splits || e.ResetsJetStream || e.Reloads || e.ReloadsWithoutAuth || e.HoldReason != "" {
		t.Errorf("EffectOf(ChangeLameDuck) = %+v, want a change that restarts one server at a time", e)
	}
	c := Change{Kind: ChangeLameDuck, From: "duration 30s, grace period 10s", To: "duration 30s, grace period 1s"}
	if got, want := c.String(), "other lame duck settings (duration 30s, grace period 10s -> duration 30s, grace period 1s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// Another route CA is a CA set that shares no certificate with the one the
// servers were given: a bundle keeping one (a rotation's first and last
// steps) is not; unknown (a server an older release wrote) is not either.
func TestAnotherRouteCAIsADisjointCASet(t *testing.T) {
	tls := func(ca string) ConfigFacts {
		f := baseFacts()
		f.RouteTLS, f.RoutesCA, f.RoutesCertificate = true, ca, "cert-"+ca
		return f
	}
	for _, tc := range []struct {
		from, to string
		split    bool
	}{
		{"a", "b", true},
		{"a", "a,b", false},
		{"a,b", "b", false},
		{"a,b", "c,d", true},
		{"", "b", false},
		{"a", "", false},
	} {
		var kinds []ChangeKind
		for _, c := range Classify(tls(tc.from), tls(tc.to)) {
			kinds = append(kinds, c.Kind)
		}
		if got := slices.Contains(kinds, ChangeRouteCA); got != tc.split {
			t.Errorf("route CA %q -> %q: kinds %v; another route CA %v, want %v", tc.from, tc.to, kinds, got, tc.split)
		}
	}
}

// A new JWT of a preloaded account under the same key is a change of
// accounts; under another operator (which re-signs every account) it is
// that change alone, unless the keys differ too.
func TestAnAccountsNewJWTIsAChangeOfAccountsUnderTheSameOperator(t *testing.T) {
	base := ConfigFacts{Version: "2.15.2", ClusterName: "demo", Operator: "OA", SystemAccount: "AS", Accounts: []string{"AAPP@1111"}, Resolver: MemoryResolver}
	kinds := func(running, target ConfigFacts) []ChangeKind {
		var out []ChangeKind
		for _, c := range Classify(running, target) {
			out = append(out, c.Kind)
		}
		return out
	}
	newJWT := base
	newJWT.Accounts = []string{"AAPP@2222"}
	if got := kinds(base, newJWT); !slices.Equal(got, []ChangeKind{ChangeAccounts}) {
		t.Errorf("a new JWT under the same key: %v, want [Accounts]", got)
	}
	otherOperator := newJWT
	otherOperator.Operator = "OB"
	if got := kinds(base, otherOperator); !slices.Equal(got, []ChangeKind{ChangeOperator}) {
		t.Errorf("another operator re-signing the account: %v, want [Operator]", got)
	}
	otherOperator.Accounts = append(otherOperator.Accounts, "AORDERS@3333")
	if got := kinds(base, otherOperator); !slices.Equal(got, []ChangeKind{ChangeOperator, ChangeAccounts}) {
		t.Errorf("another operator and an account added: %v, want [Operator Accounts]", got)
	}
}
