package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// waitProgressing waits for Progressing with the given status and reason
// and returns the cluster.
func waitProgressing(ctx context.Context, t *testing.T, s *framework.Stack, ns string, status metav1.ConditionStatus, reason string, timeout time.Duration) *clusterv1beta1.NatsCluster {
	t.Helper()
	var nc *clusterv1beta1.NatsCluster
	poll.Eventually(t, timeout, 100*time.Millisecond, "Progressing "+reason, func() error {
		var err error
		if nc, err = s.Cluster(ctx, ns, "demo"); err != nil {
			return err
		}
		return framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, status, reason)
	})
	return nc
}

func progressingMessage(nc *clusterv1beta1.NatsCluster) string {
	for _, c := range nc.Status.Conditions {
		if c.Type == clusterv1beta1.ConditionProgressing {
			return c.Message
		}
	}
	return ""
}

func requireContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q does not contain %q", what, s, sub)
		}
	}
}

// objectVersions returns what the controller writes of every StatefulSet
// (its generation, which a template or replicas change bumps, and its
// annotations, where a reload is recorded: not its resourceVersion, which
// the StatefulSet controller's status updates move), the resourceVersion of
// every ConfigMap (only the controller writes them) and the UID of every
// pod.
func objectVersions(ctx context.Context, t *testing.T, s *framework.Stack, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sel := metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=demo"}
	stss, err := s.Kube.AppsV1().StatefulSets(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range stss.Items {
		out["statefulset/"+o.Name] = fmt.Sprintf("generation %d, annotations %v", o.Generation, o.Annotations)
	}
	cms, err := s.Kube.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		out["configmap/"+o.Name] = o.ResourceVersion
	}
	pods, err := s.Kube.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pods.Items {
		out["pod/"+o.Name] = string(o.UID)
	}
	return out
}

// holdsStill checks for d that nothing of the cluster changes and Ready and
// Settled stay True while Progressing keeps reason.
func holdsStill(ctx context.Context, t *testing.T, s *framework.Stack, ns, reason string, d time.Duration) {
	t.Helper()
	holdsStillOr(ctx, t, s, ns, reason, d, false)
}

// holdsStillUnderLoad is holdsStill while a publisher writes without
// pause: Settled may then read GroupsCatchingUp (a follower a few in-flight
// writes behind) at any sample, and that is allowed too.
func holdsStillUnderLoad(ctx context.Context, t *testing.T, s *framework.Stack, ns, reason string, d time.Duration) {
	t.Helper()
	holdsStillOr(ctx, t, s, ns, reason, d, true)
}

func holdsStillOr(ctx context.Context, t *testing.T, s *framework.Stack, ns, reason string, d time.Duration, underLoad bool) {
	t.Helper()
	before := objectVersions(ctx, t, s, ns)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		nc, err := s.Cluster(ctx, ns, "demo")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			typ, reason string
			st          metav1.ConditionStatus
		}{
			{clusterv1beta1.ConditionProgressing, reason, metav1.ConditionFalse},
			{clusterv1beta1.ConditionReady, clusterv1beta1.ReasonAllServersReady, metav1.ConditionTrue},
			{clusterv1beta1.ConditionSettled, clusterv1beta1.ReasonAllGroupsCurrent, metav1.ConditionTrue},
		} {
			err := framework.CheckCondition(nc, c.typ, c.st, c.reason)
			if err != nil && underLoad && c.typ == clusterv1beta1.ConditionSettled &&
				framework.CheckCondition(nc, c.typ, metav1.ConditionFalse, clusterv1beta1.ReasonGroupsCatchingUp) == nil {
				err = nil
			}
			if err != nil {
				t.Fatalf("while held: %v", err)
			}
		}
		time.Sleep(time.Second)
	}
	after := objectVersions(ctx, t, s, ns)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("objects changed while held:\nbefore %v\nafter  %v", before, after)
	}
	t.Logf("held %s for %s: no pod restarted, no StatefulSet or ConfigMap changed, Ready and Settled stayed True", reason, d)
}

// publishN publishes n messages to a new R3 stream and waits for the acks.
func publishN(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, replicas, n int) {
	t.Helper()
	framework.CreateStream(ctx, t, js, stream, replicas)
	for i := range n {
		if _, err := js.Publish(ctx, stream+".x", []byte(fmt.Sprint(i)),
			jetstream.WithRetryAttempts(40), jetstream.WithRetryWait(100*time.Millisecond)); err != nil {
			t.Fatalf("publishing message %d: %v", i, err)
		}
	}
}

// findStreamDirs returns the directories named stream under root.
func findStreamDirs(root, stream string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == stream && filepath.Base(filepath.Dir(p)) == "streams" {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// The seed (issue 39), end to end: adding auth to a running cluster with
// streams is held without touching a server; plain restart-all is not
// enough; restart-all=reset-jetstream restarts every server together into
// operator mode and says which streams were left behind (still on the
// volumes); a version change then rolls one server at a time without
// losing a message; removing auth is held the same way. No secret reaches
// the log, the Events or the status.
func TestAddingAuthToARunningCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsAddAuth)
	nc := settledCluster(ctx, t, s, "")
	urls := s.PodURLs(ctx, t, s.NS, "demo")
	conn := framework.Connect(t, urls)
	js, _ := jetstream.New(conn)
	publishN(ctx, t, js, "ORDERS", 3, 1000)
	conn.Close()
	t.Logf("no auth, settled, stream ORDERS holds 1000 messages; meta leader %s", nc.Status.JetStream.MetaLeader)

	// 1. Apply the same cluster with auth.
	applied := time.Now()
	s.ApplyExample(ctx, t, s.NS, "natscluster-auth.yaml", nil)
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonAuthChangeBlocked, 10*time.Second)
	msg := progressingMessage(nc)
	t.Logf("after %s: Progressing=False AuthChangeBlocked: %s", time.Since(applied).Round(time.Millisecond), msg)
	requireContains(t, "message", msg, clusterv1beta1.AnnotationRestartAll, "ORDERS", clusterv1beta1.RestartAllResetJetStream)
	if got, want := nc.Status.Rollout.Pending, []string{"demo-2", "demo-1", "demo-0"}; !slices.Equal(got, want) {
		t.Errorf("status.rollout.pending %v, want %v", got, want)
	}
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonAuthChangeBlocked, 60*time.Second)

	// 2. Plain restart-all is not enough while streams would be left behind.
	patchCluster(ctx, t, s, fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, clusterv1beta1.AnnotationRestartAll))
	poll.Eventually(t, 10*time.Second, 100*time.Millisecond, "the hold to say reset-jetstream is needed", func() error {
		var err error
		if nc, err = s.Cluster(ctx, s.NS, "demo"); err != nil {
			return err
		}
		if m := progressingMessage(nc); !strings.Contains(m, "without "+clusterv1beta1.RestartAllResetJetStream+" is not acted on") {
			return fmt.Errorf("Progressing says %q", m)
		}
		return nil
	})
	t.Logf("plain restart-all: %s", progressingMessage(nc))
	requireContains(t, "message", progressingMessage(nc), "JetStream will start empty because the system account changes")
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonAuthChangeBlocked, 10*time.Second)

	// 3. restart-all=reset-jetstream: every server restarts together.
	creds := s.CredsFile(ctx, t, s.NS, "demo-app-creds")
	prober := framework.StartAcceptProber(ctx, urls, creds, 50*time.Millisecond)
	before := objectVersions(ctx, t, s, s.NS)
	patchCluster(ctx, t, s, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream))
	start := time.Now()
	nc = s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	outage, failed := prober.Stop()
	t.Logf("restart-all=reset-jetstream: Ready, Settled and UpToDate after %s; no server accepted a client for %s (%d failed probes)",
		time.Since(start).Round(time.Millisecond), outage.Round(time.Millisecond), failed)
	if _, ok := nc.Annotations[clusterv1beta1.AnnotationRestartAll]; ok {
		t.Errorf("restart-all annotation still set")
	}
	after := objectVersions(ctx, t, s, s.NS)
	for _, p := range []string{"pod/demo-0-0", "pod/demo-1-0", "pod/demo-2-0"} {
		if before[p] == after[p] {
			t.Errorf("%s was not restarted", p)
		}
	}
	revs := s.ServerRevisions(ctx, t, nc)
	for _, srv := range nc.Status.Servers {
		if srv.ConfigRevision != revs[srv.Name] {
			t.Errorf("server %+v does not report its revision %s", srv, revs[srv.Name])
		}
	}
	events, err := s.Kube.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + clusterv1beta1.EventJetStreamReset})
	if err != nil || len(events.Items) == 0 {
		t.Fatalf("no JetStreamReset Event: %v", err)
	}
	t.Logf("Event JetStreamReset: %s", events.Items[0].Message)
	requireContains(t, "JetStreamReset event", events.Items[0].Message, "ORDERS")
	for i := range 3 {
		dir := s.Node.ClaimPath(s.NS, fmt.Sprintf("data-demo-%d-0", i))
		if found := findStreamDirs(dir, "ORDERS"); len(found) == 0 {
			t.Errorf("stream ORDERS is gone from the volume of demo-%d (%s)", i, dir)
		} else {
			t.Logf("ORDERS left behind on demo-%d's volume: %s", i, found[0])
		}
	}
	app := framework.Connect(t, urls, nats.UserCredentials(creds))
	appJS, _ := jetstream.New(app)
	publishN(ctx, t, appJS, "APP", 3, 100)
	t.Log("a user of the preloaded account created stream APP and published 100 messages")

	// 7. With auth in place a version change rolls one server at a time.
	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	leader := nc.Status.JetStream.MetaLeader
	framework.CreateStream(ctx, t, appJS, "ORDERS", 3)
	pub := framework.StartPublisher(ctx, appJS, "ORDERS.new")
	time.Sleep(2 * time.Second)
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.1"}}`)
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 10*time.Minute)
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "every server on 2.15.1", func() error {
		got, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if got.Status.Version != "2.15.1" {
			return fmt.Errorf("status.servers %+v", got.Status.Servers)
		}
		return nil
	})
	tr.Stop()
	verifyNoLoss(ctx, t, s, pub, nats.UserCredentials(creds))
	if order, want := tr.RestartOrder(), expectedOrder(leader); !slices.Equal(order, want) {
		t.Errorf("with auth, the version change restarted %v, want %v", order, want)
	}
	checkRestartedOnce(t, tr)
	app.Close()

	// 5. Removing auth, with streams in the application account, is held.
	patchCluster(ctx, t, s, `{"spec":{"auth":null}}`)
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonAuthChangeBlocked, 10*time.Second)
	t.Logf("removing auth: %s", progressingMessage(nc))
	requireContains(t, "message", progressingMessage(nc), "removing auth", "APP", clusterv1beta1.RestartAllResetJetStream)
	holdsStill(ctx, t, s, s.NS, clusterv1beta1.ReasonAuthChangeBlocked, 10*time.Second)
	patchCluster(ctx, t, s, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream))
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	plain := framework.Connect(t, urls)
	plain.Close()
	t.Log("auth removed with restart-all=reset-jetstream; clients connect without credentials again")

	// 8. No secret material in the controller's log, the Events or the status.
	var secrets []string
	for _, name := range []string{"demo-system-creds", "demo-app-creds"} {
		sec, err := s.Kube.CoreV1().Secrets(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, framework.SecretStrings(sec.Data["user.creds"])...)
	}
	secrets = append(secrets, "-----BEGIN NATS USER JWT-----", "USER NKEY SEED")
	all, _ := s.Kube.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{})
	evb, _ := json.Marshal(all)
	final, _ := s.Cluster(ctx, s.NS, "demo")
	stb, _ := json.Marshal(final.Status)
	logb, _ := os.ReadFile(s.Controller.LogPath)
	for what, text := range map[string]string{"controller log": string(logb), "events": string(evb), "status": string(stb)} {
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("secret material %.12s... appears in the %s", sec, what)
			}
		}
	}
	t.Logf("checked %d secret strings against %d bytes of log, %d Events and the status", len(secrets), len(logb), len(all.Items))
}
