package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// Event reasons of a JetStream migration.
const (
	EventMigrationBackup  = "MigrationBackupStarted"
	EventMigrationRestore = "MigrationRestoreStarted"
)

// startMigration executes a StartMigration step: it creates the NatsBackup
// of every stream of the global account (phase Backup) or the NatsRestore
// of that backup into the account of spec.jetstream.migration.credentials
// (phase Restore), named for the target revision, labelled as the
// migration's and controlled by the cluster, so the next sync finds it
// (gatherMigration) whatever happened to this controller meanwhile. One
// that exists already (this step taken twice) is left as it is.
func (c *Controller) startMigration(ctx context.Context, p *plan, step *rollout.Step) error {
	nc, rev := p.facts.nc, p.out.Revision
	if step.Migration == nil || nc.Spec.JetStream == nil || nc.Spec.JetStream.Migration == nil {
		return fmt.Errorf("a StartMigration step without its payload or spec.jetstream.migration")
	}
	mig := nc.Spec.JetStream.Migration
	name := MigrationName(nc.Name, rev)
	meta := metav1.ObjectMeta{Name: name, Namespace: nc.Namespace,
		Labels: map[string]string{clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue,
			clusterv1beta1.LabelMigrationOf: nc.Name, clusterv1beta1.LabelMigrationRevision: rev},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(nc, clusterv1beta1.SchemeGroupVersion.WithKind("NatsCluster"))}}
	var err error
	switch step.Migration.Phase {
	case rollout.MigrationBackup:
		vol := mig.Volume
		if vol.SubPath == "" {
			vol.SubPath = nc.Name + "-migration"
		}
		spec := clusterv1beta1.NatsBackupSpec{Cluster: nc.Name, Streams: step.Migration.Streams, Volume: vol}
		if step.Migration.Removing {
			// The streams are in the account of the credentials.
			creds := mig.Credentials
			spec.Credentials = &creds
		}
		_, err = c.natsClient.ClusterV1beta1().NatsBackups(nc.Namespace).Create(ctx, &clusterv1beta1.NatsBackup{ObjectMeta: meta, Spec: spec},
			metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("natsbackups", "create")
		if err == nil {
			c.recorder.Eventf(nc, corev1.EventTypeNormal, EventMigrationBackup, "Migrating JetStream (1 of 3): NatsBackup %s backs up %s into claim %s before every server restarts together",
				name, strings.Join(step.Migration.Streams, ", "), vol.ClaimName)
		}
	case rollout.MigrationRestore:
		spec := clusterv1beta1.NatsRestoreSpec{Cluster: nc.Name, Backup: name}
		into := "the global account"
		if !step.Migration.Removing {
			creds := mig.Credentials
			spec.Credentials, into = &creds, "the account of the user in Secret "+creds.Name
		}
		_, err = c.natsClient.ClusterV1beta1().NatsRestores(nc.Namespace).Create(ctx, &clusterv1beta1.NatsRestore{ObjectMeta: meta, Spec: spec},
			metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("natsrestores", "create")
		if err == nil {
			c.recorder.Eventf(nc, corev1.EventTypeNormal, EventMigrationRestore, "Migrating JetStream (3 of 3): NatsRestore %s restores %s into %s",
				name, strings.Join(step.Migration.Streams, ", "), into)
		}
	default:
		return fmt.Errorf("a StartMigration step of phase %q", step.Migration.Phase)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("starting the %s of NatsCluster %s/%s's JetStream migration: %w", strings.ToLower(string(step.Migration.Phase)), nc.Namespace, nc.Name, err)
	}
	return nil
}
