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
// they happen and in Events.
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
	waitMigrated(ctx, t, s, nsMigrate, applied)
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
	checkMigrated(ctx, t, s, nsMigrate)
}

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
	waitMigrated(ctx, t, s, s.NS, applied)
	checkMigrated(ctx, t, s, s.NS)
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
		if n != 1 {
			t.Errorf("Event %s %d times, want once", reason, n)
		}
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

// waitMigrated waits for demo to be up to date with the migration done.
func waitMigrated(ctx context.Context, t *testing.T, s *framework.Stack, ns string, applied time.Time) {
	t.Helper()
	poll.Eventually(t, 8*time.Minute, time.Second, "the auth change with the migration to complete", func() error {
		nc, err := s.Cluster(ctx, ns, "demo")
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation || !strings.Contains(p.Message, "JetStream migrated") {
			return fmt.Errorf("Progressing %+v", p)
		}
		t.Logf("Progressing %s: %s (%s after the change)", p.Reason, p.Message, time.Since(applied).Round(time.Second))
		return nil
	})
}

// checkMigrated checks the app account of demo: ORDERS with 100,000
// messages, EVENTS with 1,000, the consumer shipping resuming at 40,001,
// and the Events of the backup and the restore.
func checkMigrated(ctx context.Context, t *testing.T, s *framework.Stack, ns string) {
	t.Helper()
	for _, reason := range []string{controller.EventMigrationBackup, controller.EventMigrationRestore} {
		if evs, err := s.Events(ctx, ns, "demo", reason); err != nil || len(evs) == 0 {
			t.Errorf("no Event %s on demo (%v)", reason, err)
		} else {
			t.Logf("Event %s: %s", reason, evs[0].Message)
		}
	}
	app := framework.Connect(t, s.PodURLs(ctx, t, ns, "demo"), nats.UserCredentials(s.CredsFile(ctx, t, ns, "demo-app-creds")))
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"ORDERS": 100000, "EVENTS": 1000} {
		st, err := ajs.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s in the app account: %v", name, err)
		}
		if got := st.CachedInfo().State; got.Msgs != want || got.LastSeq != want || got.FirstSeq != 1 {
			t.Errorf("%s in the app account holds %d messages (sequences %d-%d), want %d", name, got.Msgs, got.FirstSeq, got.LastSeq, want)
		} else {
			t.Logf("%s in the app account: %d messages, sequences 1-%d (replicas %d)", name, got.Msgs, got.LastSeq, st.CachedInfo().Config.Replicas)
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
		if md.Sequence.Stream != 40001 || string(m.Data()) != "ORDERS.new 40001" {
			t.Errorf("the consumer resumed at %d (%q), want 40001", md.Sequence.Stream, m.Data())
		} else {
			t.Logf("the consumer shipping resumes at stream sequence %d: %q", md.Sequence.Stream, m.Data())
		}
		got++
	}
	if got != 1 {
		t.Errorf("the restored consumer delivered %d messages, want 1", got)
	}
}
