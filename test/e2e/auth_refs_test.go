package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// onlyKinds keeps the objects of the given kinds from a manifest.
func onlyKinds(kinds ...string) func(*unstructured.Unstructured) bool {
	return func(o *unstructured.Unstructured) bool {
		for _, k := range kinds {
			if o.GetKind() == k {
				return true
			}
		}
		return false
	}
}

// foreignAccountJWT is an account JWT issued by another NATS operator.
func foreignAccountJWT(t *testing.T) (string, string) {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	acc, _ := nkeys.CreateAccount()
	pub, _ := acc.PublicKey()
	claims := jwt.NewAccountClaims(pub)
	claims.Name = "app"
	tok, err := claims.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	return pub, tok
}

// References that cannot be resolved or do not check out, on a running
// cluster without streams, each hold with their reason and touch no server;
// fixing them moves the change on to AuthChangeBlocked; there, with no
// streams, plain restart-all completes it.
func TestBadAuthReferencesHoldAndPlainRestartAllCompletes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsAuthRefs)
	settledCluster(ctx, t, s, "")
	trusts := s.Nats.TrustV1beta1()

	// The NatsCluster with auth, but none of what it references yet.
	s.ApplyExampleFiltered(ctx, t, s.NS, "natscluster-auth.yaml", onlyKinds("NatsCluster"))
	nc := waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonTrustNotFound, 10*time.Second)
	t.Logf("missing NatsOperatorTrust: %s", progressingMessage(nc))
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonTrustNotFound, 5*time.Second)

	// Everything else in place, but the NATS operator JWT does not decode.
	s.ApplyExampleFiltered(ctx, t, s.NS, "natscluster-auth.yaml", onlyKinds("NatsAccountTrust", "Secret"))
	good, err := framework.ExampleObject("natscluster-auth.yaml", "NatsOperatorTrust")
	if err != nil {
		t.Fatal(err)
	}
	bad := good.DeepCopy()
	_ = unstructured.SetNestedField(bad.Object, "not-a-jwt", "spec", "operatorJWT")
	s.ApplyObjects(ctx, t, s.NS, bad)
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonTrustInvalid, 10*time.Second)
	t.Logf("undecodable NATS operator JWT: %s", progressingMessage(nc))
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonTrustInvalid, 5*time.Second)

	// A good trust, but the credentials Secret is missing.
	s.ApplyObjects(ctx, t, s.NS, good)
	if err := s.Kube.CoreV1().Secrets(s.NS).Delete(ctx, "demo-system-creds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonCredentialsNotFound, 10*time.Second)
	t.Logf("missing credentials Secret: %s", progressingMessage(nc))
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonCredentialsNotFound, 5*time.Second)

	// The Secret back, but the account trust is issued by another NATS operator.
	s.ApplyExampleFiltered(ctx, t, s.NS, "natscluster-auth.yaml", onlyKinds("Secret"))
	at, err := trusts.NatsAccountTrusts(s.NS).Get(ctx, "demo-app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	goodSpec := at.Spec
	pub, tok := foreignAccountJWT(t)
	at.Spec = trustv1beta1.NatsAccountTrustSpec{PublicKey: pub, JWT: tok}
	if _, err := trusts.NatsAccountTrusts(s.NS).Update(ctx, at, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonAccountTrustInvalid, 10*time.Second)
	t.Logf("account trust issued by another NATS operator: %s", progressingMessage(nc))
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonAccountTrustInvalid, 5*time.Second)

	// Fixed: the change proceeds to the AuthChangeBlocked hold.
	at, _ = trusts.NatsAccountTrusts(s.NS).Get(ctx, "demo-app", metav1.GetOptions{})
	at.Spec = goodSpec
	if _, err := trusts.NatsAccountTrusts(s.NS).Update(ctx, at, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonAuthChangeBlocked, 10*time.Second)
	t.Logf("references fixed: %s", progressingMessage(nc))

	// No streams: plain restart-all is enough.
	before := objectVersions(ctx, t, s, s.NS)
	patchCluster(ctx, t, s, fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, clusterv1beta1.AnnotationRestartAll))
	nc = s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	after := objectVersions(ctx, t, s, s.NS)
	for _, p := range []string{"pod/demo-0-0", "pod/demo-1-0", "pod/demo-2-0"} {
		if before[p] == after[p] {
			t.Errorf("%s was not restarted", p)
		}
	}
	if _, ok := nc.Annotations[clusterv1beta1.AnnotationRestartAll]; ok {
		t.Error("restart-all annotation not removed")
	}
	revs := s.ServerRevisions(ctx, t, nc)
	for _, srv := range nc.Status.Servers {
		if srv.ConfigRevision != revs[srv.Name] {
			t.Errorf("server %+v not on its revision %s", srv, revs[srv.Name])
		}
	}
	t.Logf("plain restart-all without streams completed: %s", framework.Conditions(nc))
}
