package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/test/framework"
)

// An operator-mode cluster on the memory resolver (the auth example with
// spec.auth.resolver Memory and a trust chain of the test's own), under a
// publisher of the account's user on an R3 stream, takes other server tags
// with a raised JetStream limit, and then an account added, each by a config
// reload of every server: no pod restarts, appliedBy Reload, every server
// reports its revision and runs the tags, and a user of the added account
// connects through every server. No acknowledged message is lost.
func TestOperatorModeReloadsOnTheMemoryResolver(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsOperatorReload)
	s.CreateNamespace(ctx, t, s.NS)

	f := rendertest.NewTrust(t, rendertest.WithAccounts("demo-app"))
	if _, err := s.Nats.TrustV1beta1().NatsOperatorTrusts(s.NS).Create(ctx, f.OperatorTrust(s.NS, "demo"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.AccountTrusts(s.NS) {
		if _, err := s.Nats.TrustV1beta1().NatsAccountTrusts(s.NS).Create(ctx, a, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-system-creds"}, Data: map[string][]byte{"user.creds": f.System.UserCreds(t, "demo-system")}}
	if _, err := s.Kube.CoreV1().Secrets(s.NS).Create(ctx, sys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nc, err := framework.ExampleObject("natscluster-auth.yaml", "NatsCluster")
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(nc.Object, string(clusterv1beta1.ResolverMemory), "spec", "auth", "resolver")
	s.ApplyObjects(ctx, t, s.NS, nc)
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)

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
	pub := framework.StartPublisher(ctx, js, "ORDERS.new")
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
	verifyNoLoss(ctx, t, s, pub, nats.UserCredentials(app))
}
