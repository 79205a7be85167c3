package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/test/framework"
)

// operatorCluster is an operator-mode cluster of the test's own trust chain
// under a publisher of the account's user on an R3 stream ORDERS.
type operatorCluster struct {
	fixture    *rendertest.Fixture
	appCreds   string
	writeCreds func(name string, b []byte) string
	urls       []string
	pub        *framework.Publisher
}

// startOperatorCluster runs the NatsCluster of the auth example on the
// memory resolver with a trust chain of the test's own: with
// signingKey, the NatsOperatorTrust gives a signing key of the system
// account (Secret demo-sys-signing) and the cluster no
// spec.auth.systemCredentials; without, the Secret demo-system-creds holds
// a system user's creds, as in the example.
func startOperatorCluster(ctx context.Context, t *testing.T, s *framework.Stack, signingKey bool, edits ...func(*unstructured.Unstructured)) operatorCluster {
	t.Helper()
	f := rendertest.NewTrust(t, rendertest.WithAccounts("demo-app"))
	ot := f.OperatorTrust(s.NS, "demo")
	if signingKey {
		var skSeed []byte
		_, skSeed, ot.Spec.SystemAccountJWT = f.SystemSigningKey(t)
		ot.Spec.SystemAccountSigningKey = &trustv1beta1.SecretKeySelector{Name: "demo-sys-signing"}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-sys-signing"}, Data: map[string][]byte{"seed": skSeed}}
		if _, err := s.Kube.CoreV1().Secrets(s.NS).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		sys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-system-creds"}, Data: map[string][]byte{"user.creds": f.System.UserCreds(t, "demo-system")}}
		if _, err := s.Kube.CoreV1().Secrets(s.NS).Create(ctx, sys, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Nats.TrustV1beta1().NatsOperatorTrusts(s.NS).Create(ctx, ot, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.AccountTrusts(s.NS) {
		if _, err := s.Nats.TrustV1beta1().NatsAccountTrusts(s.NS).Create(ctx, a, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := framework.ExampleObject("natscluster-auth.yaml", "NatsCluster")
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(nc.Object, string(clusterv1beta1.ResolverMemory), "spec", "auth", "resolver")
	if signingKey {
		unstructured.RemoveNestedField(nc.Object, "spec", "auth", "systemCredentials")
	}
	for _, edit := range edits {
		edit(nc)
	}
	s.ApplyObjects(ctx, t, s.NS, nc)
	up := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	via := clusterv1beta1.SystemAccessSystemCredentials
	if signingKey {
		via = clusterv1beta1.SystemAccessMintedUser
	}
	if a := up.Status.SystemAccess; a == nil || a.Via != via || len(a.Operations) != len(clusterv1beta1.SystemOperations) {
		t.Errorf("status.systemAccess %+v, want %s enabling %v", a, via, clusterv1beta1.SystemOperations)
	}

	dir := t.TempDir()
	writeCreds := func(name string, b []byte) string {
		p := filepath.Join(dir, name+".creds")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	app := writeCreds("app", f.Accounts[0].UserCreds(t, "demo-app-user"))
	urls := s.PodURLs(ctx, t, s.NS, "demo")
	js, err := jetstream.New(framework.Connect(t, urls, nats.UserCredentials(app)))
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	return operatorCluster{fixture: f, appCreds: app, writeCreds: writeCreds, urls: urls, pub: framework.StartPublisher(ctx, js, "ORDERS.new")}
}

// An operator-mode cluster on the memory resolver (the auth example with
// spec.auth.resolver Memory and a trust chain of the test's own), under a
// publisher of the account's user on an R3 stream, takes other server tags
// with a raised JetStream limit, then an account added, then a renewed route
// certificate, each by a config reload of every server: no pod restarts,
// appliedBy Reload, every server reports its revision and runs the tags (and
// the new route certificate), and a user of the added account connects
// through every server. No acknowledged message is lost.
func TestOperatorModeReloadsOnTheMemoryResolver(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsOperatorReload)
	s.CreateNamespace(ctx, t, s.NS)
	oc := startOperatorCluster(ctx, t, s, false)
	f, app, writeCreds, urls, pub := oc.fixture, oc.appCreds, oc.writeCreds, oc.urls, oc.pub
	before := s.PodUIDs(ctx, s.NS, serverPods...)

	reloaded := func(step string) *clusterv1beta1.NatsCluster {
		t.Helper()
		applied := time.Now()
		reloading, final := waitUpToDateRecording(ctx, t, s, clusterv1beta1.ReasonReloading)
		t.Logf("%s: UpToDate by reload in %s; Progressing while it ran: %v", step, time.Since(applied).Round(time.Millisecond), reloading)
		if len(reloading) == 0 {
			t.Errorf("%s: Progressing never read %s", step, clusterv1beta1.ReasonReloading)
		}
		if c := final.Status.Config; c == nil || c.AppliedBy != clusterv1beta1.AppliedByReload || c.RestartReason != "" {
			t.Errorf("%s: status.config = %+v, want appliedBy Reload and no restartReason", step, c)
		}
		after := s.PodUIDs(ctx, s.NS, serverPods...)
		for _, p := range serverPods {
			if before[p] == "" || after[p] != before[p] {
				t.Errorf("%s: pod %s had UID %q before and %q after: it restarted", step, p, before[p], after[p])
			}
		}
		return final
	}

	// 1. Other server tags and a raised JetStream limit (the example's
	// default memory store is 75% of its 1Gi limit, 768Mi).
	patchCluster(ctx, t, s, `{"spec":{"serverTags":{"az":"a"},"jetstream":{"limits":{"maxMemoryStore":"800Mi"}}}}`)
	final := reloaded("server tags and a raised limit")
	checkServersRunTheirRevision(ctx, t, s, final, "az:a")
	for _, srv := range final.Status.Servers {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, srv.Name+"-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, body, err := framework.Get(fmt.Sprintf("http://%s:8222/jsz", pod.Status.PodIP))
		var jz struct {
			Config struct {
				MaxMemory int64 `json:"max_memory"`
			} `json:"config"`
		}
		if err == nil {
			err = json.Unmarshal([]byte(body), &jz)
		}
		if err != nil || jz.Config.MaxMemory != 800<<20 {
			t.Errorf("%s runs JetStream max_memory %d (%v), want %d", srv.Name, jz.Config.MaxMemory, err, 800<<20)
		}
	}

	// 2. An account added: a user of it connects through every server.
	added := f.NewAccount(t, "demo-orders")
	at := f.AccountTrusts(s.NS)[0].DeepCopy()
	at.Name, at.Spec.PublicKey, at.Spec.JWT = added.Name, added.PublicKey, added.JWT
	if _, err := s.Nats.TrustV1beta1().NatsAccountTrusts(s.NS).Create(ctx, at, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patchCluster(ctx, t, s, `{"spec":{"auth":{"accountTrustRefs":[{"name":"demo-app"},{"name":"demo-orders"}]}}}`)
	reloaded("an account added")
	orders := writeCreds("orders", added.UserCreds(t, "demo-orders-user"))
	for _, u := range urls {
		c, err := nats.Connect(u, nats.UserCredentials(orders), nats.NoReconnect(), nats.Timeout(5*time.Second))
		if err == nil {
			err = c.Flush()
			c.Close()
		}
		if err != nil {
			t.Errorf("a user of the added account does not connect through %s: %v", u, err)
		}
	}

	// 3. A route certificate renewal (the controller reissues it when its
	// Secret goes): every server reports the new certificate's expiry.
	oldRoute := readVarzTLS(ctx, t, s, "demo-0").Cluster.NotAfter
	time.Sleep(1100 * time.Millisecond) // a new certificate's NotAfter differs by at least a second
	if err := s.Kube.CoreV1().Secrets(s.NS).Delete(ctx, "demo-routes-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reloaded("a route certificate renewal")
	waitAllReport(ctx, t, s, "a new route certificate", func(v varzTLS) bool { return v.Cluster.NotAfter.After(oldRoute) })
	verifyNoLoss(ctx, t, s, pub, nats.UserCredentials(app))
}

// An operator-mode cluster whose NatsOperatorTrust gives only a signing key
// of the system account (no spec.auth.systemCredentials), under a
// publisher: the controller mints its own short-lived system user (30 s
// lifetime here) and with it scales 3 -> 5 -> 3 (peer removal and
// evacuation over $SYS), replaces a server, and replaces every server for
// larger claims on a class that cannot expand; the minted user is renewed
// on the way (the controller logs each one minted); 0 lost. Deleting it
// then holds for the account's stream until force-delete.
func TestOperatorModeDayTwoWithOnlyTheSigningKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.OwnController(ctx, t, "operator-sysuser", "--system-user-lifetime=30s")
	storageClass(ctx, t, s, "fixed-operator", false)
	oc := startOperatorCluster(ctx, t, s, true, withClass("fixed-operator"))

	minted := func() int { return strings.Count(s.Controller.Log(), "Minted a system account user") }
	servers := func(nc *clusterv1beta1.NatsCluster) []string {
		var out []string
		for _, srv := range nc.Status.Servers {
			out = append(out, srv.Name)
		}
		return out
	}
	settledWith := func(what string, want ...string) {
		t.Helper()
		poll.Eventually(t, 6*time.Minute, 250*time.Millisecond, what, func() error {
			nc, err := s.Cluster(ctx, s.NS, "demo")
			if err != nil {
				return err
			}
			if got := servers(nc); !slices.Equal(got, want) || len(nc.Status.Removals) != 0 {
				return fmt.Errorf("servers %v, removals %+v; %s", got, nc.Status.Removals, framework.Conditions(nc))
			}
			if _, ok := nc.Annotations[clusterv1beta1.AnnotationReplaceServer]; ok {
				return fmt.Errorf("the replace annotation is still set; %s", framework.Conditions(nc))
			}
			return framework.CheckSettledUpToDate(nc)
		})
	}
	five := []string{"demo-0", "demo-1", "demo-2", "demo-3", "demo-4"}
	first := s.PodUIDs(ctx, s.NS, serverPods...)
	patchCluster(ctx, t, s, `{"spec":{"replicas":5}}`)
	settledWith("scaled up to 5", five...)
	for _, p := range []string{"demo-3-0", "demo-4-0"} {
		if s.PodUIDs(ctx, s.NS, p)[p] == "" {
			t.Fatalf("scaled up to 5 without pod %s", p)
		}
	}
	patchCluster(ctx, t, s, `{"spec":{"replicas":3}}`)
	settledWith("scaled down to 3", five[:3]...)
	if got := s.PodUIDs(ctx, s.NS, "demo-3-0", "demo-4-0"); got["demo-3-0"] != "" || got["demo-4-0"] != "" {
		t.Errorf("pods of the removed servers remain: %v", got)
	}
	t.Logf("scaled 3 -> 5 -> 3 with %d minted system users", minted())
	// The servers that stay are not restarted by the scale: their route
	// lists name only the seed servers and the servers before them, so
	// their configs do not change.
	if after := s.PodUIDs(ctx, s.NS, serverPods...); !equalMaps(after, first) {
		t.Errorf("the first three servers restarted across 3 -> 5 -> 3: %v, before %v", after, first)
	}

	// The minted user is renewed in the last third of its 30 s lifetime;
	// the replacement then goes through the renewed one.
	poll.Eventually(t, time.Minute, 500*time.Millisecond, "a second minted system user", func() error {
		if n := minted(); n < 2 {
			return fmt.Errorf("%d minted", n)
		}
		return nil
	})
	claim := func() string {
		c, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data-demo-1-0", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(c.UID)
	}
	oldClaim := claim()
	patchCluster(ctx, t, s, `{"metadata":{"annotations":{"`+clusterv1beta1.AnnotationReplaceServer+`":"demo-1"}}}`)
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "demo-1 being replaced", func() error {
		if now := claim(); now != "" && now != oldClaim {
			return nil
		}
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if len(nc.Status.Removals) > 0 {
			return nil
		}
		return fmt.Errorf("no removal yet; %s", framework.Conditions(nc))
	})
	settledWith("demo-1 replaced", five[:3]...)
	if now := claim(); now == "" || now == oldClaim {
		t.Errorf("demo-1's claim is %q, want a new one (was %s)", now, oldClaim)
	}
	t.Logf("demo-1 replaced; the controller minted %d system users", minted())

	// Storage replacement: larger claims on a class that cannot expand
	// replace every server, one at a time, each with a new claim.
	uidsBefore, _ := claims(ctx, t, s)
	start := time.Now()
	patchCluster(ctx, t, s, storagePatch)
	poll.Eventually(t, 10*time.Minute, 250*time.Millisecond, "every server replaced with a 2Gi claim", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		uids, capacity := claims(ctx, t, s)
		for _, srv := range five[:3] {
			if uids[srv] == "" || uids[srv] == uidsBefore[srv] || capacity[srv] != "2Gi" {
				return fmt.Errorf("%s's claim %s (%s) not replaced yet; removals %+v; %s", srv, uids[srv], capacity[srv], nc.Status.Removals, framework.Conditions(nc))
			}
		}
		return framework.CheckSettledUpToDate(nc)
	})
	t.Logf("every claim replaced with a 2Gi one in %s; the controller minted %d system users", time.Since(start).Round(time.Millisecond), minted())
	verifyNoLoss(ctx, t, s, oc.pub, nats.UserCredentials(oc.appCreds))

	// Deletion: the account's stream holds it until force-delete.
	msg := deleteHeld(ctx, t, s, "demo")
	requireContains(t, "the hold message", msg, "JetStream holds 1 stream ("+oc.fixture.Accounts[0].PublicKey+"/ORDERS)", clusterv1beta1.AnnotationForceDelete)
	patchCluster(ctx, t, s, `{"metadata":{"annotations":{"`+clusterv1beta1.AnnotationForceDelete+`":"true"}}}`)
	waitClusterGone(ctx, t, s, "demo", time.Minute)
}
