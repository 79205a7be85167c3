package backups

import (
	"fmt"
	"maps"
	"path"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// Labels of the Jobs, CronJobs and pods this controller makes.
const (
	// LabelBackup names the NatsBackup a Job or CronJob runs.
	LabelBackup = "cluster.nats-operator.io/backup"
	// LabelRestore names the NatsRestore a Job runs.
	LabelRestore = "cluster.nats-operator.io/restore"
	// labelJobName is the label the Job controller gives a Job's pods.
	labelJobName = "batch.kubernetes.io/job-name"
)

// Paths in the Job's container.
const (
	backupMount = "/backup"
	credsMount  = "/creds"
	reportMount = "/report"
	reportPath  = reportMount + "/termination-log"
)

// jobUser is the user every Job runs as: the image's non-root user.
const jobUser = 65532

// RunPath is the directory of a run in the claim: <subPath>/<job>.
func RunPath(b *clusterv1beta1.NatsBackup, job string) string {
	return path.Join(subPath(b), job)
}

func subPath(b *clusterv1beta1.NatsBackup) string {
	if b.Spec.Volume.SubPath != "" {
		return b.Spec.Volume.SubPath
	}
	return b.Name
}

// ServerURLs are the client URLs of every server of a cluster, through
// their stable names under the headless Service.
func ServerURLs(nc *clusterv1beta1.NatsCluster) string {
	urls := make([]string, nc.Spec.Replicas)
	for i := range urls {
		urls[i] = fmt.Sprintf("nats://%s:%d", render.PodHost(nc.Name, nc.Namespace, int32(i)), render.ClientPort)
	}
	return strings.Join(urls, ",")
}

// OneOffJobName is the Job of a NatsBackup without a schedule, named for
// its UID (see RestoreJobName).
func OneOffJobName(b *clusterv1beta1.NatsBackup) string {
	return b.Name + "-" + string(b.UID)[:min(5, len(b.UID))]
}

// RestoreJobName is the Job of a NatsRestore, named for its UID too: a
// NatsRestore deleted and made again (the way out of a failed migration
// restore) never reads the Job of the one before, which the garbage
// collector may not have deleted yet.
func RestoreJobName(r *clusterv1beta1.NatsRestore) string {
	return r.Name + "-restore-" + string(r.UID)[:min(5, len(r.UID))]
}

func labels(kind, name string) map[string]string {
	return map[string]string{
		clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue,
		kind:                          name,
	}
}

// podLabels are the labels of a Job's pods: the Job's, and the cluster's
// name under render.LabelJobOf, by which the cluster's NetworkPolicy
// admits them to the client port whatever its clientsFrom says.
func podLabels(kind, name string, nc *clusterv1beta1.NatsCluster) map[string]string {
	l := labels(kind, name)
	maps.Copy(l, render.JobPodLabels(nc.Name))
	return l
}

// podSpec is the pod of every Job: the controller's image running
// subcommand with args, the claim at /backup, the creds Secret at /creds,
// the report in an emptyDir at /report (the termination message), as a
// restricted pod without a service account token.
func podSpec(image, claim string, creds *clusterv1beta1.SecretKeySelector, args []string) corev1.PodSpec {
	no, yes := false, true
	user := int64(jobUser)
	volumes := []corev1.Volume{
		{Name: "backup", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
		{Name: "report", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{{Name: "backup", MountPath: backupMount}, {Name: "report", MountPath: reportMount}}
	if creds != nil {
		key := creds.Key
		if key == "" {
			key = "user.creds"
		}
		volumes = append(volumes, corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: creds.Name, Items: []corev1.KeyToPath{{Key: key, Path: "user.creds"}}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "creds", MountPath: credsMount, ReadOnly: true})
		args = append(args, "--creds="+credsMount+"/user.creds")
	}
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: &no,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user, FSGroup: &user,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: volumes,
		Containers: []corev1.Container{{
			Name:                     "job",
			Image:                    image,
			Args:                     args,
			VolumeMounts:             mounts,
			TerminationMessagePath:   reportPath,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			Env: []corev1.EnvVar{{Name: "JOB_NAME", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + labelJobName + "']"}}}},
		}},
	}
}

// backupJobSpec is the Job of a NatsBackup's run: it writes under
// /backup/<subPath>/<its own Job name>, so each run of a schedule has its
// own directory.
func backupJobSpec(b *clusterv1beta1.NatsBackup, nc *clusterv1beta1.NatsCluster, image string) batchv1.JobSpec {
	args := []string{"backup", "--servers=" + ServerURLs(nc), "--dir=" + backupMount + "/" + subPath(b) + "/$(JOB_NAME)", "--report=" + reportPath}
	if len(b.Spec.Streams) > 0 {
		args = append(args, "--streams="+strings.Join(b.Spec.Streams, ","))
	}
	if b.Spec.NoConsumers {
		args = append(args, "--no-consumers")
	}
	zero := int32(0)
	return batchv1.JobSpec{
		BackoffLimit: &zero,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: podLabels(LabelBackup, b.Name, nc)},
			Spec:       podSpec(image, b.Spec.Volume.ClaimName, b.Spec.Credentials, args),
		},
	}
}

// BackupJob is the Job of a NatsBackup without a schedule.
func BackupJob(b *clusterv1beta1.NatsBackup, nc *clusterv1beta1.NatsCluster, image string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: OneOffJobName(b), Namespace: b.Namespace, Labels: labels(LabelBackup, b.Name),
			OwnerReferences: []metav1.OwnerReference{owner(b, "NatsBackup")}},
		Spec: backupJobSpec(b, nc, image),
	}
}

// BackupCronJob is the CronJob of a scheduled NatsBackup: one run at a
// time (Forbid), its Jobs named by the CronJob controller.
func BackupCronJob(b *clusterv1beta1.NatsBackup, nc *clusterv1beta1.NatsCluster, image string) *batchv1.CronJob {
	keep := int32(3)
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, Labels: labels(LabelBackup, b.Name),
			OwnerReferences: []metav1.OwnerReference{owner(b, "NatsBackup")}},
		Spec: batchv1.CronJobSpec{
			Schedule:                   b.Spec.Schedule,
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: &keep,
			FailedJobsHistoryLimit:     &keep,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(LabelBackup, b.Name)},
				Spec:       backupJobSpec(b, nc, image),
			},
		},
	}
}

// RestoreJob is the Job of a NatsRestore from the run at path of the
// backup's claim.
func RestoreJob(r *clusterv1beta1.NatsRestore, nc *clusterv1beta1.NatsCluster, claim, runPath, image string) *batchv1.Job {
	args := []string{"restore", "--servers=" + ServerURLs(nc), "--dir=" + backupMount + "/" + runPath, "--report=" + reportPath}
	if len(r.Spec.Streams) > 0 {
		args = append(args, "--streams="+strings.Join(r.Spec.Streams, ","))
	}
	if r.Spec.Overwrite {
		args = append(args, "--overwrite")
	}
	zero := int32(0)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: RestoreJobName(r), Namespace: r.Namespace, Labels: labels(LabelRestore, r.Name),
			OwnerReferences: []metav1.OwnerReference{owner(r, "NatsRestore")}},
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(LabelRestore, r.Name, nc)},
				Spec:       podSpec(image, claim, r.Spec.Credentials, args),
			},
		},
	}
}

func owner(o metav1.Object, kind string) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: clusterv1beta1.SchemeGroupVersion.String(), Kind: kind, Name: o.GetName(), UID: o.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes}
}
