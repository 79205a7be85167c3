package controller

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// gatherMigration reads the NatsBackups and NatsRestores of the cluster's
// JetStream migrations (labelled migration-of=<name>, controlled by the
// cluster), with spec.jetstream.migration only: decide picks those of the
// target revision (migrationInput).
func (g *gatherer) gatherMigration(ctx context.Context, f *facts) error {
	nc := f.nc
	if nc.Spec.JetStream == nil || nc.Spec.JetStream.Migration == nil {
		return nil
	}
	// The account of the migration's credentials: where the streams go
	// when auth is added, where they come from when it is removed. A
	// Secret that is missing or holds no creds file is the planner's to
	// report, only when a migration needs it.
	creds := nc.Spec.JetStream.Migration.Credentials
	sec, err := g.src.API.Secret(ctx, nc.Namespace, creds.Name)
	switch {
	case apierrors.IsNotFound(err):
		f.migrationAccountProblem = fmt.Sprintf("Secret %s/%s of spec.jetstream.migration.credentials does not exist", nc.Namespace, creds.Name)
	case err != nil:
		return err
	default:
		key := cmp.Or(creds.Key, "user.creds")
		if f.migrationAccount, err = render.CredsAccount(sec.Data[key]); err != nil {
			f.migrationAccountProblem = fmt.Sprintf("key %s of Secret %s/%s (spec.jetstream.migration.credentials): %v", key, nc.Namespace, creds.Name, err)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{clusterv1beta1.LabelMigrationOf: nc.Name})
	backups, err := g.src.Backups.NatsBackups(nc.Namespace).List(sel)
	if err != nil {
		return err
	}
	restores, err := g.src.Restores.NatsRestores(nc.Namespace).List(sel)
	if err != nil {
		return err
	}
	for _, b := range backups {
		if metav1.IsControlledBy(b, nc) {
			f.migrationBackups = append(f.migrationBackups, b.DeepCopy())
		}
	}
	for _, r := range restores {
		if metav1.IsControlledBy(r, nc) {
			f.migrationRestores = append(f.migrationRestores, r.DeepCopy())
		}
	}
	return nil
}

// MigrationName names the NatsBackup and the NatsRestore of a cluster's
// JetStream migration toward revision: "<cluster>-migrate-<revision>",
// the cluster's name cut to 20 characters (at most 39 in all, within a
// NatsBackup's 40).
func MigrationName(cluster, revision string) string {
	if len(cluster) > 20 {
		cluster = strings.TrimRight(cluster[:20], "-")
	}
	return cluster + "-migrate-" + revision
}

// migrationInput is the planner's view of the migration toward the target
// revision: nil without spec.jetstream.migration; the NatsBackup and
// NatsRestore of that revision, when they exist.
func migrationInput(f *facts, revision string) *rollout.Migration {
	nc := f.nc
	if nc.Spec.JetStream == nil || nc.Spec.JetStream.Migration == nil {
		return nil
	}
	mig := nc.Spec.JetStream.Migration
	m := &rollout.Migration{Claim: mig.Volume.ClaimName, Account: fmt.Sprintf("the account of the user in Secret %s", mig.Credentials.Name),
		CredentialsAccount: f.migrationAccount, CredentialsProblem: f.migrationAccountProblem}
	for _, b := range f.migrationBackups {
		if b.Labels[clusterv1beta1.LabelMigrationRevision] != revision {
			continue
		}
		m.Backup = rollout.MigrationObject{Name: b.Name, Phase: b.Status.Phase}
		if c := meta.FindStatusCondition(b.Status.Conditions, clusterv1beta1.ConditionComplete); c != nil {
			m.Backup.Reason, m.Backup.Message = c.Reason, c.Message
		}
		if r := b.Status.LastRun; r != nil && r.Phase == clusterv1beta1.BackupSucceeded {
			m.Backup.Phase = clusterv1beta1.BackupSucceeded
			for _, s := range r.Streams {
				m.Backup.Streams = append(m.Backup.Streams, s.Name)
				m.Backup.LastSeqs = append(m.Backup.LastSeqs, s.LastSeq)
			}
		} else if m.Backup.Phase == clusterv1beta1.BackupSucceeded {
			// No run recorded yet under a Succeeded phase: not done.
			m.Backup.Phase = clusterv1beta1.BackupRunning
		}
		if m.Backup.Phase == "" {
			m.Backup.Phase = clusterv1beta1.BackupPending
		}
	}
	for _, r := range f.migrationRestores {
		if r.Labels[clusterv1beta1.LabelMigrationRevision] != revision {
			continue
		}
		m.Restore = rollout.MigrationObject{Name: r.Name, Phase: cmp.Or(r.Status.Phase, clusterv1beta1.BackupPending)}
		if c := meta.FindStatusCondition(r.Status.Conditions, clusterv1beta1.ConditionComplete); c != nil {
			m.Restore.Reason, m.Restore.Message = c.Reason, c.Message
		}
		for _, s := range r.Status.Streams {
			m.Restore.Streams = append(m.Restore.Streams, s.Name)
		}
	}
	return m
}
