package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/controller"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsMigrate = framework.SharedNamespace("migrate")

// A 3-server cluster without auth holds ORDERS (R3, 100,000 messages) and
// EVENTS (R1, 1,000) in the global account, and a durable consumer of
// ORDERS has acknowledged 40,000. Auth is added (the NatsOperatorTrust,
// NatsAccountTrust and Secrets of natscluster-auth.yaml) with
// spec.jetstream.migration (a claim, the app user's creds) and the
// annotation restart-all=migrate-jetstream: the controller backs up both
// streams (MigratingJetStream 1 of 3), restarts every server together with
// auth (2 of 3), restores them into the app account (3 of 3), and only
// then reports UpToDate. In the app account ORDERS holds 100,000 messages
// and EVENTS 1,000, every message acknowledged before the backup is there,
// and the consumer resumes at 40,001. The phases are in Progressing as
// they happen and in Events. Then auth is removed the same way: the
// streams the first change left behind come back from the volumes into
// the global account (the old system account's meta state lists them), so
// the restore refuses to overwrite them and the migration holds with
// MigrationBlocked naming them; once they are deleted (they are the older
// copies: the consumer at 40,000) with the NatsRestore, the streams go
// back into the global account, the consumer resuming at 40,002 (40,001
// was acknowledged in between).
func TestAddingAuthMigratesTheStreamsIntoTheAccount(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsMigrate)
	patch := migrationSetup(ctx, t, s, nsMigrate)

	// Every Progressing message of the migration, in order.
	var mu sync.Mutex
	var phases []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for watchCtx.Err() == nil {
			if nc, err := s.Cluster(watchCtx, nsMigrate, "demo"); err == nil {
				if p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing); p != nil {
					line := p.Reason + ": " + p.Message
					mu.Lock()
					if len(phases) == 0 || phases[len(phases)-1] != line {
						phases = append(phases, line)
					}
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	applied := time.Now()
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(nsMigrate).Patch(ctx, "demo", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMigrated(ctx, t, s, nsMigrate, applied, appAccount)
	stopWatch()
	mu.Lock()
	seen := strings.Join(phases, "\n")
	mu.Unlock()
	t.Logf("Progressing through the migration:\n%s", seen)
	// Phases 1 and 2 last seconds (a Job's pod starts; the servers
	// restart); phase 3 can be over between two samples, so the Events
	// (checkMigrated) are its proof.
	for _, want := range []string{"MigratingJetStream: migrating JetStream (1 of 3): backing up 2 streams", "MigratingJetStream: migrating JetStream (2 of 3)"} {
		if !strings.Contains(seen, want) {
			t.Errorf("Progressing never said %q", want)
		}
	}
	checkMigrated(ctx, t, s, nsMigrate, nats.UserCredentials(s.CredsFile(ctx, t, nsMigrate, "demo-app-creds")), 40001, true)

	// And back: removing auth with the migration puts the streams into
	// the global account, the consumer where it was left (40,001 acked).
	patch = []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"auth":null}}`,
		clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllMigrateJetStream))
	applied = time.Now()
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(nsMigrate).Patch(ctx, "demo", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The streams the first change left behind in the global account come
	// back from the volumes with the old system account: the restore
	// refuses to overwrite them, and the migration holds, naming them.
	var held *metav1.Condition
	poll.Eventually(t, 5*time.Minute, 500*time.Millisecond, "MigrationBlocked by the streams left behind", func() error {
		nc, err := s.Cluster(ctx, nsMigrate, "demo")
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if p == nil || p.Reason != clusterv1beta1.ReasonMigrationBlocked || !strings.Contains(p.Message, "StreamExists: streams EVENTS, ORDERS exist") {
			return fmt.Errorf("Progressing %+v", p)
		}
		held = p
		return nil
	})
	t.Logf("held: %s", held.Message)
	old := framework.Connect(t, s.PodURLs(ctx, t, nsMigrate, "demo"))
	ojs, err := jetstream.New(old)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ojs.Consumer(ctx, "ORDERS", "shipping"); err != nil || c.CachedInfo().AckFloor.Stream != 40000 {
		t.Fatalf("the ORDERS back from the volume is not the one left behind (consumer at 40,000): %v", err)
	}
	t.Logf("ORDERS back in the global account is the copy left behind (consumer shipping at 40,000): deleting it and EVENTS, and the NatsRestore")
	for _, name := range []string{"ORDERS", "EVENTS"} {
		if err := ojs.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	restoreName := strings.TrimPrefix(held.Message[strings.Index(held.Message, "NatsRestore "):], "NatsRestore ")
	restoreName = restoreName[:strings.IndexAny(restoreName, ": ")]
	if err := s.Nats.ClusterV1beta1().NatsRestores(nsMigrate).Delete(ctx, restoreName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMigrated(ctx, t, s, nsMigrate, applied, "the global account")
	checkMigrated(ctx, t, s, nsMigrate, nil, 40002, true)
	for _, reason := range []string{controller.EventMigrationBackup, controller.EventMigrationRestore} {
		evs, err := s.Events(ctx, nsMigrate, "demo", reason)
		if err != nil {
			t.Fatal(err)
		}
		n := int32(0)
		for _, e := range evs {
			n += max(e.Count, 1)
		}
		if want := int32(2); reason == controller.EventMigrationRestore {
			// The restore was started again after the hold.
			if n != 3 {
				t.Errorf("Event %s %d times after adding and removing auth, want 3", reason, n)
			}
		} else if n != want {
			t.Errorf("Event %s %d times after adding and removing auth, want %d", reason, n, want)
		}
	}
}

// appAccount is how the migration names the account of demo-app-creds.
const appAccount = "the account of the user in Secret demo-app-creds"

// The migration of TestAddingAuthMigratesTheStreamsIntoTheAccount with the
// controller SIGKILLed once in each phase — once the backup is made, once
// the servers are restarting together, once the restore is made — and
// started again each time: it completes once (one NatsBackup, one
// NatsRestore, one Job each, one Event per phase) with every message and
// the consumer's position, nothing restored twice.
func TestControllerKilledInEachMigrationPhase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.OwnController(ctx, t, "migrate-killed")
	patch := migrationSetup(ctx, t, s, s.NS)
	applied := time.Now()
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(s.NS).Patch(ctx, "demo", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	count := func(list func() (int, error)) int {
		n, err := list()
		if err != nil {
			return -1
		}
		return n
	}
	backups := func() (int, error) {
		l, err := s.Nats.ClusterV1beta1().NatsBackups(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}
	restores := func() (int, error) {
		l, err := s.Nats.ClusterV1beta1().NatsRestores(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}
	restarted := func() bool {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		return err == nil && nc.Annotations[clusterv1beta1.AnnotationRestartAll] == ""
	}
	for _, point := range []struct {
		what string
		at   func() bool
	}{
		{"once the backup is made", func() bool { return count(backups) == 1 }},
		{"once the servers restart together", restarted},
		{"once the restore is made", func() bool { return count(restores) == 1 }},
	} {
		poll.Eventually(t, 5*time.Minute, 20*time.Millisecond, "the controller "+point.what, func() error {
			if point.at() {
				return nil
			}
			return fmt.Errorf("%d NatsBackups, %d NatsRestores, restart-all cleared %t", count(backups), count(restores), restarted())
		})
		s.Controller.Kill()
		t.Logf("killed the controller %s", point.what)
		time.Sleep(2 * time.Second)
		s.Controller.Start()
	}
	waitMigrated(ctx, t, s, s.NS, applied, appAccount)
	checkMigrated(ctx, t, s, s.NS, nats.UserCredentials(s.CredsFile(ctx, t, s.NS, "demo-app-creds")), 40001, false)
	if b, r := count(backups), count(restores); b != 1 || r != 1 {
		t.Errorf("%d NatsBackups and %d NatsRestores, want one each", b, r)
	}
	jobs, err := s.Kube.BatchV1().Jobs(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	if len(names) != 2 {
		t.Errorf("Jobs %v, want one backup and one restore", names)
	}
	for _, reason := range []string{controller.EventMigrationBackup, controller.EventMigrationRestore} {
		evs, err := s.Events(ctx, s.NS, "demo", reason)
		if err != nil {
			t.Fatal(err)
		}
		n := int32(0)
		for _, e := range evs {
			n += max(e.Count, 1)
		}
		// An Event is sent after its step, asynchronously: a controller
		// killed right after the step may never send it; it is never sent
		// twice, since no phase is started twice.
		if n > 1 {
			t.Errorf("Event %s %d times, want at most once", reason, n)
		}
		t.Logf("Event %s %d times", reason, n)
	}
}

// migrationSetup makes the cluster demo of ns without auth, its streams
// ORDERS (R3, 100,000 messages) and EVENTS (R1, 1,000) and the consumer
// shipping of ORDERS at 40,000, applies the trust of natscluster-auth.yaml
// and a claim, and returns the patch that adds auth with the migration.
func migrationSetup(ctx context.Context, t *testing.T, s *framework.Stack, ns string) []byte {
	t.Helper()
	s.ApplyExample(ctx, t, ns, "natscluster-jetstream.yaml", nil)
	s.WaitSettledUpToDate(ctx, t, ns, "demo", 4*time.Minute)

	conn := framework.Connect(t, s.PodURLs(ctx, t, ns, "demo"))
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	framework.CreateStream(ctx, t, js, "EVENTS", 1)
	publish := func(subject string, n int) {
		t.Helper()
		for start := 0; start < n; start += 1000 {
			var acks []jetstream.PubAckFuture
			for i := start; i < min(start+1000, n); i++ {
				f, err := js.PublishAsync(subject, []byte(fmt.Sprintf("%s %d", subject, i+1)))
				if err != nil {
					t.Fatal(err)
				}
				acks = append(acks, f)
			}
			for _, f := range acks {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					t.Fatalf("publishing to %s: %v", subject, err)
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
			}
		}
	}
	publish("ORDERS.new", 100000)
	publish("EVENTS.e", 1000)
	cons, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shipping", AckPolicy: jetstream.AckAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for acked := 0; acked < 40000; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var last jetstream.Msg
		for m := range batch.Messages() {
			last = m
			acked++
		}
		if last != nil {
			if err := last.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if info, err := cons.Info(ctx); err != nil || info.AckFloor.Stream != 40000 {
		t.Fatalf("the consumer's ack floor before the migration: %+v %v", info, err)
	}
	t.Logf("ORDERS: 100,000 messages acknowledged by JetStream, consumer shipping at 40,000; EVENTS: 1,000")

	// The trust, the app account and its user, and a claim for the backup.
	s.ApplyExampleFiltered(ctx, t, ns, "natscluster-auth.yaml", func(o *unstructured.Unstructured) bool { return o.GetKind() != "NatsCluster" })
	if _, err := s.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "migration"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	authSpec, err := framework.ExampleObject("natscluster-auth.yaml", "NatsCluster")
	if err != nil {
		t.Fatal(err)
	}
	auth, _, _ := unstructured.NestedMap(authSpec.Object, "spec", "auth")
	patch, err := (&unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{clusterv1beta1.AnnotationRestartAll: clusterv1beta1.RestartAllMigrateJetStream}},
		"spec": map[string]any{"auth": auth, "jetstream": map[string]any{"migration": map[string]any{
			"volume": map[string]any{"claimName": "migration"}, "credentials": map[string]any{"name": "demo-app-creds"}}}},
	}}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return patch
}

// waitMigrated waits for demo to be up to date with the migration into
// the account into done.
func waitMigrated(ctx context.Context, t *testing.T, s *framework.Stack, ns string, applied time.Time, into string) {
	t.Helper()
	poll.Eventually(t, 8*time.Minute, time.Second, "the auth change with the migration to complete", func() error {
		nc, err := s.Cluster(ctx, ns, "demo")
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation || !strings.Contains(p.Message, "restored into "+into) {
			return fmt.Errorf("Progressing %+v", p)
		}
		t.Logf("Progressing %s: %s (%s after the change)", p.Reason, p.Message, time.Since(applied).Round(time.Second))
		return nil
	})
}

// checkMigrated checks the account of demo that auth connects to (the
// app account with the app user's creds, else the global account): ORDERS
// with 100,000 messages, EVENTS with 1,000, the consumer shipping resuming
// at resumeAt (its next message is acknowledged), and, with events, the
// Events of the backup and the restore.
func checkMigrated(ctx context.Context, t *testing.T, s *framework.Stack, ns string, auth nats.Option, resumeAt uint64, events bool) {
	t.Helper()
	for _, reason := range []string{controller.EventMigrationBackup, controller.EventMigrationRestore} {
		if !events {
			break
		}
		if evs, err := s.Events(ctx, ns, "demo", reason); err != nil || len(evs) == 0 {
			t.Errorf("no Event %s on demo (%v)", reason, err)
		} else {
			t.Logf("Event %s: %s", reason, evs[len(evs)-1].Message)
		}
	}
	var opts []nats.Option
	if auth != nil {
		opts = append(opts, auth)
	}
	app := framework.Connect(t, s.PodURLs(ctx, t, ns, "demo"), opts...)
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"ORDERS": 100000, "EVENTS": 1000} {
		st, err := ajs.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if got := st.CachedInfo().State; got.Msgs != want || got.LastSeq != want || got.FirstSeq != 1 {
			t.Errorf("%s holds %d messages (sequences %d-%d), want %d", name, got.Msgs, got.FirstSeq, got.LastSeq, want)
		} else {
			t.Logf("%s: %d messages, sequences 1-%d (replicas %d)", name, got.Msgs, got.LastSeq, st.CachedInfo().Config.Replicas)
		}
	}
	c, err := ajs.Consumer(ctx, "ORDERS", "shipping")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("ORDERS.new %d", resumeAt); md.Sequence.Stream != resumeAt || string(m.Data()) != want {
			t.Errorf("the consumer resumed at %d (%q), want %d", md.Sequence.Stream, m.Data(), resumeAt)
		} else {
			t.Logf("the consumer shipping resumes at stream sequence %d: %q", md.Sequence.Stream, m.Data())
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 1 {
		t.Errorf("the restored consumer delivered %d messages, want 1", got)
	}
}
