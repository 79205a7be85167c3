package backups

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/backup"
	"github.com/nats-operator/nats-operator/pkg/controller"
)

// maxRuns is how many runs that succeeded status.runs keeps.
const maxRuns = 10

// jobOutcome is what a Job and its pod say: the run's phase, times,
// message, and the report's streams.
type jobOutcome struct {
	phase      clusterv1beta1.BackupPhase
	reason     string
	message    string
	start, end *metav1.Time
	streams    []clusterv1beta1.BackupStream
	more       int
}

// outcome reads a Job: Complete is Succeeded, Failed is Failed (the
// report's reason and message, else the Job's words), active Running,
// else Pending with what its pod waits for.
func (c *Controller) outcome(j *batchv1.Job) jobOutcome {
	o := jobOutcome{phase: clusterv1beta1.BackupPending, start: j.Status.StartTime, end: j.Status.CompletionTime}
	var failed *batchv1.JobCondition
	for i, cond := range j.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			o.phase = clusterv1beta1.BackupSucceeded
		case batchv1.JobFailed:
			o.phase, failed = clusterv1beta1.BackupFailed, &j.Status.Conditions[i]
			if o.end == nil {
				t := cond.LastTransitionTime
				o.end = &t
			}
		}
	}
	if o.phase == clusterv1beta1.BackupPending && (j.Status.Active > 0 || j.Status.StartTime != nil) {
		// Started: running, or ended with the Job's condition to come.
		o.phase = clusterv1beta1.BackupRunning
	}
	pod := c.jobPod(j)
	var report *backup.Report
	if pod != nil {
		for _, cs := range pod.Status.ContainerStatuses {
			switch {
			case cs.State.Terminated != nil:
				if r, err := backup.ParseReport(cs.State.Terminated.Message); err == nil {
					report = &r
				} else if cs.State.Terminated.ExitCode != 0 {
					o.message = strings.TrimSpace(cs.State.Terminated.Message)
				}
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				o.message = fmt.Sprintf("pod %s: %s %s", pod.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
		}
		if o.message == "" && pod.Status.Phase == corev1.PodPending {
			for _, cond := range pod.Status.Conditions {
				if cond.Status == corev1.ConditionFalse && cond.Message != "" {
					o.message = fmt.Sprintf("pod %s: %s", pod.Name, cond.Message)
				}
			}
		}
	}
	if report != nil {
		for _, s := range report.Streams {
			o.streams = append(o.streams, clusterv1beta1.BackupStream{Name: s.Name, Messages: s.Messages, Bytes: s.Bytes,
				FirstSeq: s.FirstSeq, LastSeq: s.LastSeq, Consumers: int32(s.Consumers), DataBytes: s.DataBytes})
		}
		o.more = report.More
		if report.Reason != "" {
			o.reason, o.message = report.Reason, report.Message
		}
	}
	if o.phase == clusterv1beta1.BackupFailed && o.message == "" && failed != nil {
		o.message = strings.TrimSpace(failed.Reason + ": " + failed.Message)
	}
	return o
}

// summary is a run's streams in a sentence.
func summary(verb string, streams []clusterv1beta1.BackupStream, more int) string {
	var msgs uint64
	var data int64
	names := make([]string, 0, len(streams))
	for _, s := range streams {
		msgs += s.Messages
		data += s.DataBytes
		if len(names) < 5 {
			names = append(names, fmt.Sprintf("%s (%d messages, last sequence %d)", s.Name, s.Messages, s.LastSeq))
		}
	}
	n := len(streams) + more
	list := strings.Join(names, ", ")
	if n > len(names) {
		list += fmt.Sprintf(" and %d more", n-len(names))
	}
	if n == 0 {
		return verb + " no stream: the account has none"
	}
	return fmt.Sprintf("%s %d streams, %d messages, %d bytes of snapshots: %s", verb, n, msgs, data, list)
}

func (c *Controller) syncBackup(ctx context.Context, name cache.ObjectName) error {
	b, err := c.backups.NatsBackups(name.Namespace).Get(name.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	status := b.Status.DeepCopy()
	status.ObservedGeneration = b.Generation
	nc, err := c.clusters.NatsClusters(b.Namespace).Get(b.Spec.Cluster)
	switch {
	case apierrors.IsNotFound(err):
		status.Phase = clusterv1beta1.BackupPending
		setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonClusterNotFound,
			fmt.Sprintf("NatsCluster %s/%s does not exist: the backup waits for it", b.Namespace, b.Spec.Cluster))
		return c.writeBackupStatus(ctx, b, status)
	case err != nil:
		return err
	case nc.Spec.TLS != nil:
		status.Phase = clusterv1beta1.BackupPending
		setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonBackupUnsupported,
			fmt.Sprintf("NatsCluster %s has client TLS (spec.tls), which backup Jobs do not speak yet: nothing was started", nc.Name))
		return c.writeBackupStatus(ctx, b, status)
	}

	// Before the first run only: a run that started had its references.
	if status.LastRun == nil {
		if reason, msg, err := c.missingReference(ctx, b.Namespace, b.Spec.Volume.ClaimName, b.Spec.Credentials, "spec"); err != nil {
			return err
		} else if reason != "" {
			status.Phase = clusterv1beta1.BackupPending
			setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, reason, msg+": nothing was started")
			return c.writeBackupStatus(ctx, b, status)
		}
	}
	if err := c.ensureBackupWorkload(ctx, b, nc, status); err != nil {
		return err
	}

	jobs, err := c.jobs.Jobs(b.Namespace).List(selector(LabelBackup, b.Name))
	if err != nil {
		return err
	}
	slices.SortFunc(jobs, func(x, y *batchv1.Job) int {
		return y.CreationTimestamp.Compare(x.CreationTimestamp.Time)
	})
	for i := len(jobs) - 1; i >= 0; i-- { // oldest first, so the newest ends up first
		j := jobs[i]
		o := c.outcome(j)
		run := clusterv1beta1.BackupRun{Job: j.Name, Path: RunPath(b, j.Name), Phase: o.phase, StartTime: o.start, CompletionTime: o.end,
			StreamCount: int32(len(o.streams) + o.more), Streams: o.streams}
		switch o.phase {
		case clusterv1beta1.BackupSucceeded:
			run.Message = summary("backed up", o.streams, o.more)
		case clusterv1beta1.BackupFailed:
			run.Message = strings.TrimSpace(o.reason + ": " + o.message)
			run.Message = strings.TrimPrefix(run.Message, ": ")
		default:
			run.Message = o.message
		}
		c.noteRun(b, status.LastRun, &run)
		if i == 0 {
			status.LastRun = &run
		}
		if o.phase == clusterv1beta1.BackupSucceeded && !slices.ContainsFunc(status.Runs, func(r clusterv1beta1.BackupRun) bool { return r.Job == j.Name }) {
			status.Runs = append([]clusterv1beta1.BackupRun{run}, status.Runs...)
		}
	}
	if len(status.Runs) > maxRuns {
		status.Runs = status.Runs[:maxRuns]
	}

	last := status.LastRun
	switch {
	case last == nil && b.Spec.Schedule != "":
		status.Phase = clusterv1beta1.BackupScheduled
		setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonScheduled,
			fmt.Sprintf("no run yet: the first runs on the schedule %q", b.Spec.Schedule))
	case last == nil:
		status.Phase = clusterv1beta1.BackupPending
		setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonRunning, "the backup Job is being made")
	case last.Phase == clusterv1beta1.BackupSucceeded:
		status.Phase = last.Phase
		if b.Spec.Schedule != "" {
			status.Phase = clusterv1beta1.BackupScheduled
		}
		setComplete(&status.Conditions, b.Generation, metav1.ConditionTrue, clusterv1beta1.ReasonBackupSucceeded,
			fmt.Sprintf("run %s %s, into %s of claim %s", last.Job, last.Message, last.Path, b.Spec.Volume.ClaimName))
	case last.Phase == clusterv1beta1.BackupFailed:
		status.Phase = last.Phase
		setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonJobFailed,
			fmt.Sprintf("run %s failed: %s", last.Job, last.Message))
	default:
		status.Phase = last.Phase
		msg := fmt.Sprintf("run %s is %s", last.Job, strings.ToLower(string(last.Phase)))
		if last.Message != "" {
			msg += ": " + last.Message
		}
		setComplete(&status.Conditions, b.Generation, metav1.ConditionFalse, clusterv1beta1.ReasonRunning, msg)
	}
	return c.writeBackupStatus(ctx, b, status)
}

// ensureBackupWorkload creates the one-off Job (once: not again after it
// is gone, when its run is in the catalogue) or the CronJob, and keeps the
// CronJob's schedule, arguments and pod labels those of the spec.
func (c *Controller) ensureBackupWorkload(ctx context.Context, b *clusterv1beta1.NatsBackup, nc *clusterv1beta1.NatsCluster, status *clusterv1beta1.NatsBackupStatus) error {
	logger := klog.FromContext(ctx)
	if b.Spec.Schedule == "" {
		name := OneOffJobName(b)
		if status.LastRun != nil && status.LastRun.Job == name {
			return nil
		}
		if _, err := c.jobs.Jobs(b.Namespace).Get(name); !apierrors.IsNotFound(err) {
			return err
		}
		_, err := c.kube.BatchV1().Jobs(b.Namespace).Create(ctx, BackupJob(b, nc, c.image), metav1.CreateOptions{FieldManager: controller.FieldManager})
		if err == nil {
			logger.V(2).Info("Created backup Job", "job", klog.KRef(b.Namespace, name))
			c.recorder.Eventf(b, corev1.EventTypeNormal, "Started", "Started Job %s backing up %s of NatsCluster %s into claim %s",
				name, streamsOf(b.Spec.Streams), nc.Name, b.Spec.Volume.ClaimName)
		}
		return createdOrThere(err)
	}
	want := BackupCronJob(b, nc, c.image)
	cj, err := c.cronJobs.CronJobs(b.Namespace).Get(b.Name)
	if apierrors.IsNotFound(err) {
		_, err = c.kube.BatchV1().CronJobs(b.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: controller.FieldManager})
		if err == nil {
			c.recorder.Eventf(b, corev1.EventTypeNormal, "Scheduled", "Scheduled CronJob %s (%q) backing up %s of NatsCluster %s", b.Name, b.Spec.Schedule, streamsOf(b.Spec.Streams), nc.Name)
		}
		return createdOrThere(err)
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(cj, b) {
		return fmt.Errorf("CronJob %s/%s exists and is not controlled by NatsBackup %s", cj.Namespace, cj.Name, b.Name)
	}
	// The pods' labels too: a CronJob written before its pods carried
	// render.LabelJobOf gets it, or the cluster's NetworkPolicy would not
	// admit its runs.
	labelled := true
	for k, v := range want.Spec.JobTemplate.Spec.Template.Labels {
		labelled = labelled && cj.Spec.JobTemplate.Spec.Template.Labels[k] == v
	}
	if cj.Spec.Schedule == want.Spec.Schedule && labelled && apiequality.Semantic.DeepEqual(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, want.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args) {
		return nil
	}
	cj = cj.DeepCopy()
	cj.Spec.Schedule, cj.Spec.JobTemplate = want.Spec.Schedule, want.Spec.JobTemplate
	_, err = c.kube.BatchV1().CronJobs(b.Namespace).Update(ctx, cj, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	return err
}

// noteRun emits an Event when a run starts or ends (a run the status
// showed in another phase, or not at all).
func (c *Controller) noteRun(b *clusterv1beta1.NatsBackup, before, run *clusterv1beta1.BackupRun) {
	if before != nil && before.Job == run.Job && before.Phase == run.Phase {
		return
	}
	if slices.ContainsFunc(b.Status.Runs, func(r clusterv1beta1.BackupRun) bool { return r.Job == run.Job }) {
		return
	}
	switch run.Phase {
	case clusterv1beta1.BackupRunning:
		c.recorder.Eventf(b, corev1.EventTypeNormal, "Running", "Job %s is backing up into %s", run.Job, run.Path)
	case clusterv1beta1.BackupSucceeded:
		c.recorder.Eventf(b, corev1.EventTypeNormal, clusterv1beta1.ReasonBackupSucceeded, "Job %s %s", run.Job, run.Message)
	case clusterv1beta1.BackupFailed:
		c.recorder.Eventf(b, corev1.EventTypeWarning, clusterv1beta1.ReasonJobFailed, "Job %s failed: %s", run.Job, run.Message)
	}
}

func streamsOf(names []string) string {
	if len(names) == 0 {
		return "every stream"
	}
	return "streams " + strings.Join(names, ", ")
}

func setComplete(conds *[]metav1.Condition, gen int64, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: clusterv1beta1.ConditionComplete, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

func (c *Controller) writeBackupStatus(ctx context.Context, b *clusterv1beta1.NatsBackup, status *clusterv1beta1.NatsBackupStatus) error {
	if apiequality.Semantic.DeepEqual(&b.Status, status) {
		return nil
	}
	nb := b.DeepCopy()
	nb.Status = *status
	_, err := c.nats.ClusterV1beta1().NatsBackups(b.Namespace).UpdateStatus(ctx, nb, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	return statusError("NatsBackup", b, err)
}

// statusError wraps a refused status update with the object it was for.
func statusError(kind string, o metav1.Object, err error) error {
	if err != nil {
		return fmt.Errorf("updating status of %s %s: %w", kind, klog.KObj(o), err)
	}
	return nil
}

// missingReference says which reference of a Job is missing: the claim
// (ClaimNotFound) or the credentials' Secret or key (CredentialsNotFound),
// with a message naming the field; empty when both are there. A Job made
// without them would wait in ContainerCreating, saying little.
func (c *Controller) missingReference(ctx context.Context, ns, claim string, creds *clusterv1beta1.SecretKeySelector, spec string) (string, string, error) {
	if _, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return clusterv1beta1.ReasonClaimNotFound, fmt.Sprintf("%s.volume.claimName: PersistentVolumeClaim %s/%s does not exist", spec, ns, claim), nil
	} else if err != nil {
		return "", "", err
	}
	if creds == nil {
		return "", "", nil
	}
	key := creds.Key
	if key == "" {
		key = "user.creds"
	}
	sec, err := c.kube.CoreV1().Secrets(ns).Get(ctx, creds.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf("%s.credentials: Secret %s/%s does not exist", spec, ns, creds.Name), nil
	case err != nil:
		return "", "", err
	case len(sec.Data[key]) == 0:
		return clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf("%s.credentials: Secret %s/%s has no key %s", spec, ns, creds.Name, key), nil
	}
	return "", "", nil
}
