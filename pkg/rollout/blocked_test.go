package rollout

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Every fact render computes is compared by Classify: a fact added to
// ConfigFacts (and render.Facts) that Classify ignores would roll one server
// at a time unclassified.
func TestClassifyComparesEveryFact(t *testing.T) {
	base := authFacts(opA, sysA)
	base.Accounts, base.Resolver, base.JetStreamDomain, base.ServerTags = []string{appA}, "full", "hub", []string{"az:1"}
	typ := reflect.TypeFor[ConfigFacts]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		from := base
		if f.Name == "SystemUser" || f.Name == "SystemUserNKey" {
			// A fact of clusters without auth: render refuses it with auth.
			from = ConfigFacts{Version: base.Version, ClusterName: base.ClusterName, JetStream: base.JetStream}
			// How the system user authenticates is compared when there is one.
			from.SystemUser = f.Name == "SystemUserNKey"
		}
		switch f.Name {
		case "RoutesCertificate":
			// A certificate is there only with its TLS on.
			from.RouteTLS = true
		case "ClientCertificate":
			from.ClientTLS = true
		case "RoutesCA":
			// Compared only when both are known, route TLS on.
			from.RouteTLS, from.RoutesCA = true, "ca"
		case "GatewayRemotes", "GatewayTLS":
			// The gateway's settings are there only with a gateway.
			from.Gateway = true
		case "MQTTDelivery":
			// Delivery settings are there only with the MQTT listener.
			from.MQTT = "port=1883"
		case "GatewayCA":
			// A bundle is there only with gateway TLS on.
			from.Gateway, from.GatewayTLS = true, true
		}
		changed := from
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"other"}))
		default:
			t.Fatalf("ConfigFacts.%s has kind %s, which this test cannot change", f.Name, v.Kind())
		}
		if got := Classify(from, changed); len(got) == 0 {
			t.Errorf("a change of ConfigFacts.%s alone is not classified", f.Name)
		}
	}
}

func TestPlanHoldsWhatNoStepCanMake(t *testing.T) {
	tests := []struct {
		name       string
		in         Input
		reason     string
		message    string
		wantCreate bool
	}{
		{
			name:    "a reference that does not resolve holds with its reason and touches nothing",
			in:      Input{Cluster: "demo", Blocked: &Blocked{Reason: clusterv1beta1.ReasonTrustNotFound, Message: "NatsOperatorTrust ns/t does not exist"}},
			reason:  clusterv1beta1.ReasonTrustNotFound,
			message: "NatsOperatorTrust ns/t does not exist; no server was changed",
		},
		{
			name: "a spec render refuses is InvalidSpec, not an unsupported change",
			in: cluster(3, func(in *Input) {
				in.Blocked = &Blocked{Reason: clusterv1beta1.ReasonInvalidSpec, Message: "unknown access mode"}
			}),
			reason:  clusterv1beta1.ReasonInvalidSpec,
			message: "unknown access mode; no server was changed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			if d.Step != nil || len(d.Create) > 0 {
				t.Fatalf("step %+v, create %v: a hold touches and creates nothing", d.Step, d.Create)
			}
			if d.Hold == nil || d.Hold.Reason != tt.reason || !d.Hold.Notify {
				t.Fatalf("hold %+v, want a notifying hold with reason %s", d.Hold, tt.reason)
			}
			if d.Progressing.Status != metav1.ConditionFalse || d.Progressing.Reason != tt.reason || !strings.HasPrefix(d.Progressing.Message, tt.message) {
				t.Errorf("Progressing %s %s %q, want False %s %q", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message, tt.reason, tt.message)
			}
			if d.Rollout != nil || d.Soon {
				t.Errorf("rollout %+v, soon %v: a hold the user must release has no rollout in flight", d.Rollout, d.Soon)
			}
		})
	}
}

func TestPlanCreatesServersNotCreatedYet(t *testing.T) {
	in := cluster(3, func(in *Input) {
		in.ConvergedRevision = ""
		for i := range in.Servers {
			objectsAt(&in.Servers[i], newRev)
		}
		in.Servers = append(in.Servers, ServerState{Name: "demo-4", Ordinal: 4}, ServerState{Name: "demo-3", Ordinal: 3})
	})
	d := Plan(in)
	if want := []string{"demo-3", "demo-4"}; !slices.Equal(d.Create, want) {
		t.Errorf("create %v, want %v", d.Create, want)
	}
	if d.Step != nil {
		t.Errorf("step %+v", d.Step)
	}
}

// A change of the template alone (resources, image) leaves the config
// revision and still needs a restart of every server; a server whose pod was
// restarted for the target but whose ConfigMap is not at it (a step cut
// short by hand) is not taken as stepped.
func TestPlanStepsServersWhoseTemplateOrConfigIsNotTheTarget(t *testing.T) {
	t.Run("template only", func(t *testing.T) {
		in := cluster(3, func(in *Input) {
			in.TargetRevision, in.ConvergedRevision = oldRev, oldRev
			for i := range in.Servers {
				in.Servers[i].TemplateRevision, in.Servers[i].TargetTemplateRevision = "t1", "t2"
			}
		})
		d := Plan(in)
		if d.Step == nil || d.Step.Kind != RestartOne || !slices.Equal(d.Step.Servers, []string{"demo-2"}) {
			t.Fatalf("step %+v, want RestartOne demo-2", d.Step)
		}
	})
	t.Run("config not written", func(t *testing.T) {
		in := cluster(3, stepped("demo-2"), func(in *Input) { server(in, "demo-2").ConfigRevision = oldRev })
		d := Plan(in)
		if d.Step == nil || !slices.Equal(d.Step.Servers, []string{"demo-2"}) {
			t.Fatalf("step %+v, want demo-2 stepped again", d.Step)
		}
	})
}

func TestTheSystemUserIsClassifiedOnlyWithoutAuth(t *testing.T) {
	noAuth := baseFacts()
	withUser := noAuth
	withUser.SystemUser = true
	authed := authFacts(opA, sysA)
	for _, tc := range []struct {
		name            string
		running, target ConfigFacts
		want            []Change
	}{
		{"adding the system user without auth is a SystemUser change", noAuth, withUser, []Change{{Kind: ChangeSystemUser, From: "off", To: "on"}}},
		{"removing it is one too", withUser, noAuth, []Change{{Kind: ChangeSystemUser, From: "on", To: "off"}}},
		{"adding auth where the system user was is the auth change alone", withUser, authed, []Change{{Kind: ChangeAddAuth}}},
		{"removing auth for a cluster with the system user is the auth change alone", authed, withUser, []Change{{Kind: ChangeRemoveAuth}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.running, tc.target); !slices.Equal(got, tc.want) {
				t.Errorf("Classify = %v, want %v", got, tc.want)
			}
		})
	}
}

// A server whose old claim is still being deleted (it was removed or
// replaced) is not created until the claim is gone, and the Progressing
// message says it waits; the other servers are created.
func TestPlanWaitsVisiblyForAnOldClaimToGo(t *testing.T) {
	in := cluster(3, creating(), func(in *Input) { in.Servers[2].OldClaimDeleting = true })
	d := Plan(in)
	if want := []string{"demo-0", "demo-1"}; !slices.Equal(d.Create, want) {
		t.Errorf("create %v, want %v", d.Create, want)
	}
	if want := "demo-2 waits for its old claim, still being deleted, to go before it is created"; !strings.Contains(d.Progressing.Message, want) {
		t.Errorf("Progressing %s %q, want it to say %q", d.Progressing.Reason, d.Progressing.Message, want)
	}
	in.Servers[2].OldClaimDeleting = false
	if d := Plan(in); !slices.Contains(d.Create, "demo-2") || strings.Contains(d.Progressing.Message, "old claim") {
		t.Errorf("once the claim is gone: create %v, %q", d.Create, d.Progressing.Message)
	}
}
