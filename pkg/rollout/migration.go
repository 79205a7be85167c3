package rollout

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A JetStream migration keeps the streams through a change that moves the
// system account (adding auth), which would otherwise leave them behind
// (restart-all=reset-jetstream). Annotated restart-all=migrate-jetstream,
// with spec.jetstream.migration, it goes in three phases, each derived from
// the cluster and the two objects the controller makes for the target
// revision, never from memory, so a controller killed in any phase resumes
// it:
//
//	held (AuthChangeBlocked)
//	  | restart-all=migrate-jetstream
//	  v
//	1 backup: StartMigration{Backup} makes the NatsBackup of every stream;
//	  wait while it runs (MigratingJetStream); MigrationBlocked if it failed
//	  or a stream is not in it
//	  | the backup succeeded with every stream
//	  v
//	2 restart: RestartAll to the target (the annotation is cleared), as
//	  reset-jetstream would; the streams are in the backup
//	  | every server runs the target, the gate is open
//	  v
//	3 restore: StartMigration{Restore} makes the NatsRestore into the
//	  account of the migration's credentials; wait while it runs;
//	  MigrationBlocked if it failed
//	  | the restore succeeded
//	  v
//	UpToDate (the message names the streams restored)
//
// A NatsRestore runs once and refuses a stream that exists, so nothing is
// restored twice.

// Migration is what the controller found of the migration toward
// Input.TargetRevision.
type Migration struct {
	// Claim is spec.jetstream.migration.volume.claimName, Account a
	// description of the account restored into (for messages).
	Claim, Account string
	// CredentialsAccount is the public key of the account of the
	// migration's credentials (where streams come from when auth is
	// removed); CredentialsProblem says why it is unknown.
	CredentialsAccount, CredentialsProblem string
	// Backup and Restore are the NatsBackup and NatsRestore the controller
	// made for the target revision; Name is empty when there is none.
	Backup, Restore MigrationObject
}

// MigrationObject is a NatsBackup or NatsRestore of a migration.
type MigrationObject struct {
	// Name is the object's name; empty when it does not exist.
	Name string
	// Phase is its status.phase (Pending, Running, Succeeded, Failed).
	Phase clusterv1beta1.BackupPhase
	// Reason and Message are its Complete condition's.
	Reason, Message string
	// Streams are the streams it backed up or restored.
	Streams []string
	// LastSeqs are the last sequences of Streams in a backup, in order.
	LastSeqs []uint64
}

// MigrationPhase is the phase a StartMigration step starts.
type MigrationPhase string

// The phases a StartMigration step starts.
const (
	MigrationBackup  MigrationPhase = "Backup"
	MigrationRestore MigrationPhase = "Restore"
)

// MigrationStep is the payload of a StartMigration step.
type MigrationStep struct {
	Phase MigrationPhase
	// Removing says auth is removed: the backup reads the streams with
	// the migration's credentials, the restore writes them into the
	// global account; adding auth, the other way round.
	Removing bool
	// Streams are the streams to back up (the global account's) or to
	// restore (those of the backup).
	Streams []string
}

// migrate is phase 1 and 2: a held transition that leaves streams behind,
// annotated restart-all=migrate-jetstream.
func (p *planner) migrate(reset bool, streams []StreamRef) Decision {
	m := p.in.Migration
	all := p.allServersTogether()
	held := func(msg, waitingFor string) Decision {
		return p.decision(Decision{
			Hold:        &Hold{Reason: clusterv1beta1.ReasonMigrationBlocked, Message: msg, WaitingFor: waitingFor},
			Rollout:     &clusterv1beta1.RolloutStatus{TargetRevision: p.in.TargetRevision, Pending: all},
			Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonMigrationBlocked, msg),
		})
	}
	if m == nil {
		return held(fmt.Sprintf("%s=%s needs spec.jetstream.migration: the claim the streams are backed up into and the credentials of the account "+
			"they are restored into; no server was touched", clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllMigrateJetStream), "spec.jetstream.migration")
	}
	addRemove := false
	for _, c := range p.changes {
		addRemove = addRemove || c.Kind == ChangeAddAuth || c.Kind == ChangeRemoveAuth
	}
	if !addRemove {
		return held(fmt.Sprintf("%s=%s keeps the streams through adding or removing auth; another NATS operator or system account is not "+
			"migrated yet: back the streams up with a NatsBackup, then annotate %s=%s; no server was touched",
			clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllMigrateJetStream, clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream),
			clusterv1beta1.AnnotationRestartAll+"="+clusterv1beta1.RestartAllResetJetStream)
	}
	removing, into := p.migrationDirection()
	source, from := GlobalAccount, "the global account"
	if removing {
		if m.CredentialsAccount == "" {
			return held(fmt.Sprintf("removing auth moves the streams of the account of spec.jetstream.migration.credentials into the global account, "+
				"and that account is unknown: %s; no server was touched", m.CredentialsProblem), "spec.jetstream.migration.credentials")
		}
		source, from = m.CredentialsAccount, "account "+m.CredentialsAccount
	}
	var names, elsewhere []string
	for _, s := range streams {
		if s.Account == source {
			names = append(names, s.Name)
		} else {
			elsewhere = append(elsewhere, s.Name+" in account "+s.Account)
		}
	}
	if len(elsewhere) > 0 {
		return held(fmt.Sprintf("%s=%s moves the streams of %s only, and %s %s not in it: back them up with a NatsBackup, "+
			"then annotate %s=%s; no server was touched",
			clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllMigrateJetStream, from, strings.Join(elsewhere, ", "),
			plural(len(elsewhere), "is", "are"), clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream),
			clusterv1beta1.AnnotationRestartAll+"="+clusterv1beta1.RestartAllResetJetStream)
	}
	progressing := func(msg string) Decision {
		return p.decision(Decision{
			Rollout:     &clusterv1beta1.RolloutStatus{TargetRevision: p.in.TargetRevision, Pending: all},
			Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonMigratingJetStream, msg),
		})
	}
	b := m.Backup
	switch {
	case b.Name == "":
		d := progressing(fmt.Sprintf("migrating JetStream (1 of 3): backing up %s into claim %s before restarting %s together",
			CountStreams(streams), m.Claim, strings.Join(all, ", ")))
		d.Step = &Step{Kind: StartMigration, Migration: &MigrationStep{Phase: MigrationBackup, Removing: removing, Streams: names}}
		return d
	case b.Phase == clusterv1beta1.BackupFailed:
		return held(fmt.Sprintf("the backup before the auth change failed (NatsBackup %s: %s); no server was touched: fix what it says and "+
			"delete NatsBackup %s to take another, or annotate %s=%s to leave the streams behind",
			b.Name, b.Message, b.Name, clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream), "NatsBackup "+b.Name)
	case b.Phase != clusterv1beta1.BackupSucceeded:
		msg := fmt.Sprintf("migrating JetStream (1 of 3): backing up %s into claim %s (NatsBackup %s %s)", CountStreams(streams), m.Claim, b.Name, strings.ToLower(string(b.Phase)))
		if b.Message != "" {
			msg += ": " + b.Message
		}
		return progressing(msg)
	}
	var missing []string
	for _, n := range names {
		if !slices.Contains(b.Streams, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return held(fmt.Sprintf("stream %s is not in the backup (NatsBackup %s holds %s): it was made after the backup; delete NatsBackup %s to take another",
			strings.Join(missing, ", "), b.Name, strings.Join(b.Streams, ", "), b.Name), "NatsBackup "+b.Name)
	}
	// A message stored after the snapshot is not in the backup: the
	// restart would lose it. Hold until no stream grew since.
	var grew []string
	for i, n := range b.Streams {
		if i >= len(b.LastSeqs) {
			break
		}
		for _, s := range p.in.Observation.LastSeqs {
			if s.Stream.Account == source && s.Stream.Name == n && s.LastSeq > b.LastSeqs[i] {
				grew = append(grew, fmt.Sprintf("%s (last sequence %d in the backup, %d now)", n, b.LastSeqs[i], s.LastSeq))
			}
		}
	}
	if len(grew) > 0 {
		return held(fmt.Sprintf("%s took messages after the backup, which the restart would lose; no server was touched: stop the clients "+
			"writing to %s, then delete NatsBackup %s to take another", strings.Join(grew, ", "), plural(len(grew), "it", "them"), b.Name), "NatsBackup "+b.Name)
	}
	d := p.restartAllStep(reset, streams)
	if d.Step != nil && d.Step.Kind == RestartAll {
		msg := fmt.Sprintf("migrating JetStream (2 of 3): %s; the %d streams backed up in NatsBackup %s are restored into %s next",
			restartAllMessage(d.Step.Servers, d.Step), len(b.Streams), b.Name, into)
		d.Progressing = condition(metav1.ConditionTrue, clusterv1beta1.ReasonMigratingJetStream, msg)
	}
	return d
}

// migrationRestore is phase 3: every server runs the target and the gate
// is open, the migration's backup succeeded, its restore has not.
func (p *planner) migrationRestore(gate gateResult) (Decision, bool) {
	m := p.in.Migration
	if m == nil || m.Backup.Name == "" || m.Backup.Phase != clusterv1beta1.BackupSucceeded || m.Restore.Phase == clusterv1beta1.BackupSucceeded {
		return Decision{}, false
	}
	removing, into := p.migrationDirection()
	r := m.Restore
	if r.Name == "" && (!gate.open() || !p.everyServerOnTarget()) {
		// Phase 2 until the servers are back: the gate's wait, said as
		// the migration's (GateBlocked stays GateBlocked).
		d := p.waitForGate(gate, "")
		if d.Progressing.Reason == clusterv1beta1.ReasonRollingRestart {
			d.Progressing.Reason = clusterv1beta1.ReasonMigratingJetStream
			d.Progressing.Message = fmt.Sprintf("migrating JetStream (2 of 3): every server restarted together with the new config (%s); "+
				"the %d streams of NatsBackup %s are restored once they are back", d.Progressing.Message, len(m.Backup.Streams), m.Backup.Name)
			if d.Hold != nil {
				d.Hold.Reason, d.Hold.Message = d.Progressing.Reason, d.Progressing.Message
			}
		}
		return d, true
	}
	switch {
	case r.Name == "":
		return p.decision(Decision{
			Step: &Step{Kind: StartMigration, Migration: &MigrationStep{Phase: MigrationRestore, Removing: removing, Streams: m.Backup.Streams}},
			Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonMigratingJetStream, fmt.Sprintf(
				"migrating JetStream (3 of 3): restoring %d streams (%s) of NatsBackup %s into %s",
				len(m.Backup.Streams), strings.Join(m.Backup.Streams, ", "), m.Backup.Name, into)),
		}), true
	case r.Phase == clusterv1beta1.BackupFailed:
		msg := fmt.Sprintf("the restore after the auth change failed (NatsRestore %s: %s): the servers run the new config; the streams are in "+
			"NatsBackup %s: fix what it says and delete NatsRestore %s to restore again", r.Name, r.Message, m.Backup.Name, r.Name)
		if r.Reason == clusterv1beta1.ReasonStreamExists {
			msg += fmt.Sprintf("; streams of those names in %s are there already: after an earlier auth change is undone, the streams it "+
				"left behind on the volumes come back, older than the backup; delete them (or restore over them with a NatsRestore with overwrite) "+
				"and delete NatsRestore %s", into, r.Name)
		}
		return p.decision(Decision{
			Hold:        &Hold{Reason: clusterv1beta1.ReasonMigrationBlocked, Message: msg, WaitingFor: "NatsRestore " + r.Name},
			Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonMigrationBlocked, msg),
		}), true
	default:
		msg := fmt.Sprintf("migrating JetStream (3 of 3): restoring %d streams of NatsBackup %s into %s (NatsRestore %s %s)",
			len(m.Backup.Streams), m.Backup.Name, into, r.Name, strings.ToLower(string(r.Phase)))
		if r.Message != "" {
			msg += ": " + r.Message
		}
		return p.decision(Decision{Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonMigratingJetStream, msg)}), true
	}
}

// migrationDirection says whether the migration removes auth (the target
// runs without a NATS operator), and describes the account the streams
// are restored into.
func (p *planner) migrationDirection() (removing bool, into string) {
	if p.in.Target.Operator == "" {
		return true, "the global account"
	}
	return false, p.in.Migration.Account
}
