package rollout

import (
	"strings"
	"testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// migration sets Input.Migration: the claim, the account, and the state of
// the backup and restore made for the target revision.
func migration(backup, restore MigrationObject) opt {
	return func(in *Input) {
		in.Migration = &Migration{Claim: "migration", Account: "account APP", Backup: backup, Restore: restore}
	}
}

// migrationFrom is migration with the credentials' account known.
func migrationFrom(account string, backup, restore MigrationObject) opt {
	return func(in *Input) {
		migration(backup, restore)(in)
		in.Migration.CredentialsAccount = account
	}
}

// Each phase of restart-all=migrate-jetstream, adding auth to a cluster
// whose global account holds ORDERS and EVENTS: the planner decides from
// the cluster and the two objects alone, so a sync after a controller
// restart takes the same decision.
func TestMigratingJetStreamThroughAnAuthChange(t *testing.T) {
	both := func(in *Input) {
		streams(StreamRef{GlobalAccount, "ORDERS"}, StreamRef{GlobalAccount, "EVENTS"})(in)
		in.Observation.LastSeqs = []StreamSeq{{StreamRef{GlobalAccount, "EVENTS"}, 500}, {StreamRef{GlobalAccount, "ORDERS"}, 2000}}
	}
	migrate := annotate(restartAllKey, clusterv1beta1.RestartAllMigrateJetStream)
	backedUp := MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupSucceeded, Streams: []string{"EVENTS", "ORDERS"}, LastSeqs: []uint64{500, 2000}}
	onTarget := stepped("demo-0", "demo-1", "demo-2")
	tests := []struct {
		name     string
		in       Input
		step     StepKind
		phase    MigrationPhase
		reason   string
		contains []string
	}{
		{name: "without spec.jetstream.migration it is held, nothing touched",
			in: cluster(3, addAuth, both, migrate), reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"needs spec.jetstream.migration"}},
		{name: "with no backup yet the step starts the backup of both streams",
			in: cluster(3, addAuth, both, migrate, migration(MigrationObject{}, MigrationObject{})), step: StartMigration, phase: MigrationBackup,
			reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"(1 of 3): backing up 2 streams", "into claim migration"}},
		{name: "while the backup runs nothing is stepped",
			in:     cluster(3, addAuth, both, migrate, migration(MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupRunning}, MigrationObject{})),
			reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"NatsBackup demo-migrate-new running"}},
		{name: "a failed backup is held with its words, no server touched",
			in:     cluster(3, addAuth, both, migrate, migration(MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupFailed, Message: "claim migration is full"}, MigrationObject{})),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"claim migration is full", "no server was touched"}},
		{name: "a stream the backup does not hold is held",
			in: cluster(3, addAuth, streams(StreamRef{GlobalAccount, "ORDERS"}, StreamRef{GlobalAccount, "EVENTS"}, StreamRef{GlobalAccount, "LATE"}), migrate,
				migration(backedUp, MigrationObject{})),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"stream LATE is not in the backup"}},
		{name: "a stream that took messages after the backup is held, naming it",
			in: cluster(3, addAuth, both, migrate, migration(MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupSucceeded,
				Streams: []string{"EVENTS", "ORDERS"}, LastSeqs: []uint64{500, 2000}}, MigrationObject{}),
				func(in *Input) {
					in.Observation.LastSeqs = []StreamSeq{{StreamRef{GlobalAccount, "EVENTS"}, 500}, {StreamRef{GlobalAccount, "ORDERS"}, 2100}}
				}),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"ORDERS (last sequence 2000 in the backup, 2100 now) took messages after the backup", "stop the clients"}},
		{name: "once backed up every server restarts together",
			in: cluster(3, addAuth, both, migrate, migration(backedUp, MigrationObject{})), step: RestartAll,
			reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"(2 of 3): restarting demo-2, demo-1, demo-0 together", "restored into account APP next"}},
		{name: "with every server on the target the step starts the restore",
			in: cluster(3, addAuth, onTarget, migration(backedUp, MigrationObject{})), step: StartMigration, phase: MigrationRestore,
			reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"(3 of 3): restoring 2 streams (EVENTS, ORDERS)"}},
		{name: "before the servers run the target the restore waits for the gate, said as phase 2",
			in: cluster(3, addAuth, onTarget, notReady("demo-1"), migration(backedUp, MigrationObject{})), reason: clusterv1beta1.ReasonMigratingJetStream,
			contains: []string{"(2 of 3): every server restarted together", "waiting for PodsReady"}},
		{name: "a restore running goes on being reported while the restored streams catch up (the gate closed)",
			in: cluster(3, addAuth, onTarget, unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "ORDERS is catching up"),
				migration(backedUp, MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupRunning})),
			reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"(3 of 3): restoring 2 streams", "NatsRestore demo-migrate-new running"}},
		{name: "a failed restore is held with its words",
			in: cluster(3, addAuth, onTarget, migration(backedUp, MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupFailed,
				Reason: clusterv1beta1.ReasonStreamExists, Message: "StreamExists: stream ORDERS exists in the account"})),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"StreamExists: stream ORDERS exists", "delete NatsRestore demo-migrate-new",
				"the streams it left behind on the volumes come back"}},
		{name: "once restored the cluster is up to date, naming the streams",
			in:     cluster(3, addAuth, onTarget, migration(backedUp, MigrationObject{Name: "demo-migrate-new", Phase: clusterv1beta1.BackupSucceeded, Streams: []string{"EVENTS", "ORDERS"}})),
			reason: clusterv1beta1.ReasonUpToDate, contains: []string{"JetStream migrated: 2 streams (EVENTS, ORDERS) restored into account APP"}},
		{name: "removing auth backs up the streams of the credentials' account, to restore them into the global account",
			in:   cluster(3, removeAuth, streams(StreamRef{appA, "ORDERS"}, StreamRef{appA, "EVENTS"}), migrate, migrationFrom(appA, MigrationObject{}, MigrationObject{})),
			step: StartMigration, phase: MigrationBackup, reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"(1 of 3): backing up 2 streams"}},
		{name: "removing auth with credentials whose account is unknown is held",
			in:     cluster(3, removeAuth, streams(StreamRef{appA, "ORDERS"}), migrate, migration(MigrationObject{}, MigrationObject{})),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"that account is unknown"}},
		{name: "removing auth with streams of another account is held, naming them",
			in:     cluster(3, removeAuth, streams(StreamRef{appA, "ORDERS"}, StreamRef{sysB, "OTHER"}), migrate, migrationFrom(appA, MigrationObject{}, MigrationObject{})),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"moves the streams of account " + appA + " only", "OTHER in account " + sysB}},
		{name: "once auth is removed the restore goes into the global account",
			in: cluster(3, removeAuth, onTarget, migrationFrom(appA, backedUp, MigrationObject{})), step: StartMigration, phase: MigrationRestore,
			reason: clusterv1beta1.ReasonMigratingJetStream, contains: []string{"of NatsBackup demo-migrate-new into the global account"}},
		{name: "another NATS operator is not migrated: held",
			in: cluster(3, running(func(f *ConfigFacts) { *f = authFacts(opA, sysA) }), target(func(f *ConfigFacts) { *f = authFacts(opB, sysB) }),
				streams(StreamRef{appA, "ORDERS"}), migrate, migrationFrom(appA, MigrationObject{}, MigrationObject{})),
			reason: clusterv1beta1.ReasonMigrationBlocked, contains: []string{"another NATS operator or system account is not migrated yet"}},
		{name: "reset-jetstream still leaves the streams behind without a backup",
			in: cluster(3, addAuth, both, annotate(restartAllKey, clusterv1beta1.RestartAllResetJetStream), migration(MigrationObject{}, MigrationObject{})), step: RestartAll,
			reason: clusterv1beta1.ReasonRollingRestart},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in)
			var kind StepKind
			if d.Step != nil {
				kind = d.Step.Kind
			}
			if kind != tc.step {
				t.Fatalf("step %v, want %q (Progressing %s: %s)", d.Step, tc.step, d.Progressing.Reason, d.Progressing.Message)
			}
			if tc.phase != "" && (d.Step.Migration == nil || d.Step.Migration.Phase != tc.phase) {
				t.Fatalf("migration payload %+v, want phase %s", d.Step.Migration, tc.phase)
			}
			if tc.phase == MigrationBackup && strings.Join(d.Step.Migration.Streams, ",") != "EVENTS,ORDERS" {
				t.Errorf("backs up %v", d.Step.Migration.Streams)
			}
			if tc.phase != "" && d.Step.Migration.Removing != (tc.in.Target.Operator == "") {
				t.Errorf("Removing %t with target operator %q", d.Step.Migration.Removing, tc.in.Target.Operator)
			}
			if d.Progressing.Reason != tc.reason {
				t.Fatalf("Progressing %s: %s, want %s", d.Progressing.Reason, d.Progressing.Message, tc.reason)
			}
			for _, want := range tc.contains {
				if !strings.Contains(d.Progressing.Message, want) {
					t.Errorf("message %q does not say %q", d.Progressing.Message, want)
				}
			}
			switch tc.reason {
			case clusterv1beta1.ReasonMigrationBlocked:
				if d.Hold == nil || d.Hold.Reason != tc.reason || d.Step != nil {
					t.Errorf("hold %+v, step %v: want a MigrationBlocked hold and no step", d.Hold, d.Step)
				}
			case clusterv1beta1.ReasonMigratingJetStream:
				if d.Hold != nil && d.Hold.Notify {
					t.Errorf("a hold that needs the user while migrating: %+v", d.Hold)
				}
			}
		})
	}
}
