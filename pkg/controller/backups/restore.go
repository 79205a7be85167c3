package backups

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/backup"
	"github.com/nats-operator/nats-operator/pkg/controller"
)

// syncRestore makes the NatsRestore's Job once the cluster and the
// backup's run are there, and reports how it went. A restore that ended
// is not run again.
func (c *Controller) syncRestore(ctx context.Context, name cache.ObjectName) error {
	r, err := c.restores.NatsRestores(name.Namespace).Get(name.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	status := r.Status.DeepCopy()
	status.ObservedGeneration = r.Generation
	pending := func(reason, msg string) error {
		status.Phase = clusterv1beta1.BackupPending
		setComplete(&status.Conditions, r.Generation, metav1.ConditionFalse, reason, msg)
		return c.writeRestoreStatus(ctx, r, status)
	}
	ended := status.Phase == clusterv1beta1.BackupSucceeded || status.Phase == clusterv1beta1.BackupFailed
	job, err := c.jobs.Jobs(r.Namespace).Get(RestoreJobName(r))
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if job != nil && !metav1.IsControlledBy(job, r) {
		return fmt.Errorf("Job %s/%s exists and is not controlled by NatsRestore %s", job.Namespace, job.Name, r.Name)
	}
	if job == nil {
		if ended {
			return nil
		}
		nc, err := c.clusters.NatsClusters(r.Namespace).Get(r.Spec.Cluster)
		switch {
		case apierrors.IsNotFound(err):
			return pending(clusterv1beta1.ReasonClusterNotFound, fmt.Sprintf("NatsCluster %s/%s does not exist: the restore waits for it", r.Namespace, r.Spec.Cluster))
		case err != nil:
			return err
		case nc.Spec.TLS != nil:
			return pending(clusterv1beta1.ReasonBackupUnsupported, fmt.Sprintf("NatsCluster %s has client TLS (spec.tls), which restore Jobs do not speak yet: nothing was started", nc.Name))
		}
		b, err := c.backups.NatsBackups(r.Namespace).Get(r.Spec.Backup)
		if apierrors.IsNotFound(err) {
			return pending(clusterv1beta1.ReasonBackupNotFound, fmt.Sprintf("NatsBackup %s/%s does not exist: the restore waits for it", r.Namespace, r.Spec.Backup))
		}
		if err != nil {
			return err
		}
		var run *clusterv1beta1.BackupRun
		for i, br := range b.Status.Runs {
			if br.Phase == clusterv1beta1.BackupSucceeded && (r.Spec.Run == "" || br.Job == r.Spec.Run) {
				run = &b.Status.Runs[i]
				break
			}
		}
		if run == nil {
			which := "no run that succeeded yet"
			if r.Spec.Run != "" {
				which = fmt.Sprintf("no run %s that succeeded in its catalogue", r.Spec.Run)
			}
			return pending(clusterv1beta1.ReasonBackupNotFound, fmt.Sprintf("NatsBackup %s has %s: the restore waits", b.Name, which))
		}
		if reason, msg, err := c.missingReference(ctx, r.Namespace, b.Spec.Volume.ClaimName, r.Spec.Credentials, "spec"); err != nil {
			return err
		} else if reason != "" {
			return pending(reason, strings.Replace(msg, "spec.volume.claimName", "the claim of NatsBackup "+b.Name, 1)+": nothing was started")
		}
		job = RestoreJob(r, nc, b.Spec.Volume.ClaimName, run.Path, c.image)
		if _, err := c.kube.BatchV1().Jobs(r.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: controller.FieldManager}); createdOrThere(err) != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Created restore Job", "job", klog.KObj(job))
		c.recorder.Eventf(r, corev1.EventTypeNormal, "Started", "Started Job %s restoring %s of run %s of NatsBackup %s into NatsCluster %s",
			job.Name, streamsOf(r.Spec.Streams), run.Job, b.Name, nc.Name)
		status.Job, status.Path, status.Phase = job.Name, run.Path, clusterv1beta1.BackupPending
		setComplete(&status.Conditions, r.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonRunning, fmt.Sprintf("Job %s is starting", job.Name))
		return c.writeRestoreStatus(ctx, r, status)
	}

	o := c.outcome(job)
	before := status.Phase
	status.Job, status.Phase, status.StartTime, status.CompletionTime = job.Name, o.phase, o.start, o.end
	status.Streams = o.streams
	switch o.phase {
	case clusterv1beta1.BackupSucceeded:
		msg := summary("restored", o.streams, o.more)
		setComplete(&status.Conditions, r.Generation, metav1.ConditionTrue, clusterv1beta1.ReasonRestoreSucceeded, msg)
		if before != o.phase {
			c.recorder.Eventf(r, corev1.EventTypeNormal, clusterv1beta1.ReasonRestoreSucceeded, "Job %s %s", job.Name, msg)
		}
	case clusterv1beta1.BackupFailed:
		reason := clusterv1beta1.ReasonJobFailed
		if o.reason == backup.ReasonStreamExists {
			reason = clusterv1beta1.ReasonStreamExists
		}
		msg := strings.TrimPrefix(strings.TrimSpace(o.reason+": "+o.message), ": ")
		setComplete(&status.Conditions, r.Generation, metav1.ConditionFalse, reason, fmt.Sprintf("Job %s failed: %s", job.Name, msg))
		if before != o.phase {
			c.recorder.Eventf(r, corev1.EventTypeWarning, reason, "Job %s failed: %s", job.Name, msg)
		}
	default:
		msg := fmt.Sprintf("Job %s is %s", job.Name, strings.ToLower(string(o.phase)))
		if o.message != "" {
			msg += ": " + o.message
		}
		setComplete(&status.Conditions, r.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonRunning, msg)
	}
	return c.writeRestoreStatus(ctx, r, status)
}

func (c *Controller) writeRestoreStatus(ctx context.Context, r *clusterv1beta1.NatsRestore, status *clusterv1beta1.NatsRestoreStatus) error {
	if apiequality.Semantic.DeepEqual(&r.Status, status) {
		return nil
	}
	nr := r.DeepCopy()
	nr.Status = *status
	_, err := c.nats.ClusterV1beta1().NatsRestores(r.Namespace).UpdateStatus(ctx, nr, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	return statusError("NatsRestore", r, err)
}
