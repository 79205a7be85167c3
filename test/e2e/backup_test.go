package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsBackup = framework.SharedNamespace("backup")

// A loaded 3-server cluster demo (ORDERS R3 with 2,000 messages and a
// durable consumer that acknowledged 800; EVENTS R1 with 500; a publisher
// writing ORDERS all along) is backed up by a NatsBackup on the schedule
// "* * * * *" into a claim: its first run (a Job of the CronJob, the
// controller's image running `nats-operator backup`) succeeds, the
// catalogue (status.runs) names both streams with their state at the
// snapshot, and Events say so. A NatsRestore of that run into a new
// cluster, restored, brings both back with the catalogue's message counts
// and last sequences, and the consumer with its 800 acknowledged; a second
// NatsRestore into the same cluster is refused with StreamExists, the
// streams untouched.
func TestScheduledBackupRestoresIntoANewCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsBackup)
	s.ApplyExample(ctx, t, nsBackup, "natscluster-jetstream.yaml", nil)
	s.ApplyExample(ctx, t, nsBackup, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			o.SetName("restored")
		}
	})
	s.WaitSettledUpToDate(ctx, t, nsBackup, "demo", 4*time.Minute)

	conn := framework.Connect(t, s.PodURLs(ctx, t, nsBackup, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	framework.CreateStream(ctx, t, js, "EVENTS", 1)
	for i := range 2000 {
		if _, err := js.Publish(ctx, fmt.Sprintf("ORDERS.%d", i), []byte(fmt.Sprintf("order %d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 500 {
		if _, err := js.Publish(ctx, "EVENTS.e", []byte(fmt.Sprintf("event %d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shipping", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for acked := 0; acked < 800; {
		batch, err := cons.Fetch(800-acked, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			acked++
		}
	}
	pub := framework.StartPublisher(ctx, js, "ORDERS.live")
	defer pub.Stop()

	if _, err := s.Kube.CoreV1().PersistentVolumeClaims(nsBackup).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Nats.ClusterV1beta1().NatsBackups(nsBackup).Create(ctx, &clusterv1beta1.NatsBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: clusterv1beta1.NatsBackupSpec{Cluster: "demo", Schedule: "* * * * *",
			Volume: clusterv1beta1.BackupVolume{ClaimName: "backups"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Bad references are reported before any Job is made.
	for _, bad := range []struct {
		name, reason string
		spec         clusterv1beta1.NatsBackupSpec
	}{
		{"no-claim", clusterv1beta1.ReasonClaimNotFound, clusterv1beta1.NatsBackupSpec{Cluster: "demo", Volume: clusterv1beta1.BackupVolume{ClaimName: "nope"}}},
		{"no-creds", clusterv1beta1.ReasonCredentialsNotFound, clusterv1beta1.NatsBackupSpec{Cluster: "demo", Volume: clusterv1beta1.BackupVolume{ClaimName: "backups"},
			Credentials: &clusterv1beta1.SecretKeySelector{Name: "nope"}}},
		{"no-cluster", clusterv1beta1.ReasonClusterNotFound, clusterv1beta1.NatsBackupSpec{Cluster: "nope", Volume: clusterv1beta1.BackupVolume{ClaimName: "backups"}}},
	} {
		if _, err := s.Nats.ClusterV1beta1().NatsBackups(nsBackup).Create(ctx, &clusterv1beta1.NatsBackup{
			ObjectMeta: metav1.ObjectMeta{Name: bad.name}, Spec: bad.spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, time.Minute, 250*time.Millisecond, "NatsBackup "+bad.name+" Complete=False "+bad.reason, func() error {
			b, err := s.Nats.ClusterV1beta1().NatsBackups(nsBackup).Get(ctx, bad.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(b.Status.Conditions, clusterv1beta1.ConditionComplete)
			if c == nil || c.Reason != bad.reason || b.Status.LastRun != nil {
				return fmt.Errorf("Complete %+v, last run %+v", c, b.Status.LastRun)
			}
			t.Logf("NatsBackup %s: Complete %s %s: %s", bad.name, c.Status, c.Reason, c.Message)
			return nil
		})
	}
	for _, name := range []string{"no-claim", "no-creds", "no-cluster"} {
		if jobs, err := s.Kube.BatchV1().Jobs(nsBackup).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/backup=" + name}); err != nil || len(jobs.Items) != 0 {
			t.Fatalf("Jobs made for NatsBackup %s with a missing reference: %v (%v)", name, jobs, err)
		}
	}

	var run clusterv1beta1.BackupRun
	poll.Eventually(t, 4*time.Minute, time.Second, "the first run of NatsBackup nightly to succeed", func() error {
		b, err := s.Nats.ClusterV1beta1().NatsBackups(nsBackup).Get(ctx, "nightly", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, clusterv1beta1.ConditionComplete)
		if c == nil || c.Status != metav1.ConditionTrue || len(b.Status.Runs) == 0 {
			return fmt.Errorf("phase %s, Complete %+v, last run %+v", b.Status.Phase, c, b.Status.LastRun)
		}
		if b.Status.Phase != clusterv1beta1.BackupScheduled {
			return fmt.Errorf("phase %s between runs, want Scheduled", b.Status.Phase)
		}
		run = b.Status.Runs[0]
		t.Logf("NatsBackup nightly: Complete %s: %s", c.Reason, c.Message)
		return nil
	})
	acked := pub.Stop()
	t.Logf("the publisher wrote ORDERS all along: %d acknowledged", len(acked))
	inRun := map[string]clusterv1beta1.BackupStream{}
	for _, st := range run.Streams {
		inRun[st.Name] = st
	}
	orders, events := inRun["ORDERS"], inRun["EVENTS"]
	if run.StreamCount != 2 || orders.Messages < 2000 || orders.Consumers != 1 || events.Messages != 500 || events.LastSeq != 500 || orders.DataBytes == 0 {
		t.Fatalf("run %s holds %+v, want ORDERS (at least 2000 messages, 1 consumer) and EVENTS (500)", run.Job, run.Streams)
	}
	if evs, err := s.Events(ctx, nsBackup, "nightly", clusterv1beta1.ReasonBackupSucceeded); err != nil || len(evs) == 0 {
		t.Errorf("no %s Event on NatsBackup nightly (%v)", clusterv1beta1.ReasonBackupSucceeded, err)
	}

	s.WaitSettledUpToDate(ctx, t, nsBackup, "restored", 4*time.Minute)
	restore := func(name string) *clusterv1beta1.NatsRestore {
		t.Helper()
		if _, err := s.Nats.ClusterV1beta1().NatsRestores(nsBackup).Create(ctx, &clusterv1beta1.NatsRestore{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       clusterv1beta1.NatsRestoreSpec{Cluster: "restored", Backup: "nightly", Run: run.Job},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var out *clusterv1beta1.NatsRestore
		poll.Eventually(t, 3*time.Minute, time.Second, "NatsRestore "+name+" to end", func() error {
			r, err := s.Nats.ClusterV1beta1().NatsRestores(nsBackup).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if r.Status.Phase != clusterv1beta1.BackupSucceeded && r.Status.Phase != clusterv1beta1.BackupFailed {
				return fmt.Errorf("phase %q, conditions %+v", r.Status.Phase, r.Status.Conditions)
			}
			out = r
			return nil
		})
		return out
	}
	first := restore("from-nightly")
	c := meta.FindStatusCondition(first.Status.Conditions, clusterv1beta1.ConditionComplete)
	if first.Status.Phase != clusterv1beta1.BackupSucceeded || c == nil || c.Reason != clusterv1beta1.ReasonRestoreSucceeded {
		t.Fatalf("NatsRestore from-nightly: phase %s, Complete %+v", first.Status.Phase, c)
	}
	t.Logf("NatsRestore from-nightly: Complete %s: %s", c.Reason, c.Message)

	rconn := framework.Connect(t, s.PodURLs(ctx, t, nsBackup, "restored"))
	rjs, err := jetstream.New(rconn)
	if err != nil {
		t.Fatal(err)
	}
	state := func() map[string]jetstream.StreamState {
		out := map[string]jetstream.StreamState{}
		for _, name := range []string{"ORDERS", "EVENTS"} {
			st, err := rjs.Stream(ctx, name)
			if err != nil {
				t.Fatalf("stream %s in restored: %v", name, err)
			}
			out[name] = st.CachedInfo().State
		}
		return out
	}
	got := state()
	for name, want := range inRun {
		if got[name].Msgs != want.Messages || got[name].LastSeq != want.LastSeq {
			t.Errorf("restored %s holds %d messages, last sequence %d; the backup %d and %d", name, got[name].Msgs, got[name].LastSeq, want.Messages, want.LastSeq)
		} else {
			t.Logf("restored %s: %d messages, last sequence %d, as in the backup", name, want.Messages, want.LastSeq)
		}
	}
	rc, err := rjs.Consumer(ctx, "ORDERS", "shipping")
	if err != nil {
		t.Fatal(err)
	}
	if f := rc.CachedInfo().AckFloor.Stream; f != 800 {
		t.Errorf("the restored consumer shipping has ack floor %d, want 800", f)
	}

	second := restore("again")
	c = meta.FindStatusCondition(second.Status.Conditions, clusterv1beta1.ConditionComplete)
	if second.Status.Phase != clusterv1beta1.BackupFailed || c == nil || c.Reason != clusterv1beta1.ReasonStreamExists || !strings.Contains(c.Message, "streams EVENTS, ORDERS exist in the account") {
		t.Fatalf("a restore over the streams: phase %s, Complete %+v; want Failed StreamExists naming them", second.Status.Phase, c)
	}
	t.Logf("refused: Complete %s: %s", c.Reason, c.Message)
	after := state()
	for name := range inRun {
		if after[name].Msgs != got[name].Msgs || after[name].LastSeq != got[name].LastSeq {
			t.Errorf("%s changed under the refused restore: %+v -> %+v", name, got[name], after[name])
		}
	}
}
