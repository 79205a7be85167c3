package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NatsBackup takes JetStream snapshots of streams of a NatsCluster into a
// PersistentVolumeClaim: once, or on a schedule. Each run is a Job of the
// controller's image that connects to the cluster's servers as a client
// (with the credentials given, in their account), asks the JetStream API
// for a snapshot of each stream with its consumers, and writes it in the
// layout `nats stream backup` writes (a directory per stream with
// backup.json and stream.tar.s2) under <subPath>/<run>/ of the claim. The
// data goes from the servers to the volume and never through the
// controller.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nb,categories=nats
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Streams",type=integer,JSONPath=`.status.lastRun.streamCount`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastRun.completionTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 40",message="metadata.name must be a DNS label of at most 40 characters starting with a letter: it names the backup's Jobs"
type NatsBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to back up, where to, and when.
	// +required
	Spec NatsBackupSpec `json:"spec"`

	// status is the backup's runs and what each holds.
	// +optional
	Status NatsBackupStatus `json:"status,omitempty"`
}

// NatsBackupSpec is what a NatsBackup backs up, where to, and when.
type NatsBackupSpec struct {
	// cluster is the NatsCluster of this namespace whose streams are backed
	// up.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.cluster cannot be changed: make another NatsBackup"
	Cluster string `json:"cluster"`

	// streams are the names of the streams to back up; empty, every
	// stream of the account.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^[^.*>\s]+$`
	Streams []string `json:"streams,omitempty"`

	// credentials are the creds file of a user of the account whose
	// streams are backed up, from a Secret of this namespace (a cluster in
	// operator mode); absent, the backup connects without credentials,
	// into the global account of a cluster without auth.
	// +optional
	Credentials *SecretKeySelector `json:"credentials,omitempty"`

	// volume is the PersistentVolumeClaim the backup is written to.
	// +required
	Volume BackupVolume `json:"volume"`

	// schedule, when set, runs the backup on this cron schedule (a
	// Kubernetes CronJob's syntax, e.g. "0 3 * * *"), each run into a
	// directory of its own; absent, it runs once.
	// +optional
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule,omitempty"`

	// noConsumers leaves the consumers out of the snapshots.
	// +optional
	NoConsumers bool `json:"noConsumers,omitempty"`
}

// BackupVolume is where backups are written: a PersistentVolumeClaim of
// the NatsBackup's namespace, under subPath.
type BackupVolume struct {
	// claimName is the PersistentVolumeClaim (ReadWriteOnce is enough: one
	// run at a time writes to it).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// subPath is the directory of the claim the runs are written under;
	// default the NatsBackup's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(p, p == '..' || p == '.')",message="subPath may not contain . or .. segments"
	SubPath string `json:"subPath,omitempty"`
}

// BackupPhase is where a backup or restore is.
type BackupPhase string

// Phases of a NatsBackup's run and of a NatsRestore.
const (
	// BackupPending: the run's Job is made, its pod not running yet, or a
	// reference it needs is missing (the Ready condition says which).
	BackupPending BackupPhase = "Pending"
	// BackupRunning: the Job runs.
	BackupRunning BackupPhase = "Running"
	// BackupSucceeded: every stream was written (restored).
	BackupSucceeded BackupPhase = "Succeeded"
	// BackupFailed: the Job failed; the condition says why, in the words
	// of the Job.
	BackupFailed BackupPhase = "Failed"
	// BackupScheduled: a scheduled backup waiting for its next run.
	BackupScheduled BackupPhase = "Scheduled"
)

// NatsBackupStatus is what a NatsBackup has done.
type NatsBackupStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is the phase of the latest run (Scheduled between runs of a
	// scheduled backup).
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`

	// conditions: Complete (True once a run succeeded, with the run's
	// summary; False with the reason a run failed or cannot start).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// lastRun is the latest run, running or ended.
	// +optional
	LastRun *BackupRun `json:"lastRun,omitempty"`

	// runs is the catalogue: the runs that succeeded, newest first, up to
	// 10, each with what it holds.
	// +optional
	// +listType=atomic
	Runs []BackupRun `json:"runs,omitempty"`
}

// BackupRun is one run of a NatsBackup: its Job, where it wrote, and what
// it holds.
type BackupRun struct {
	// job is the run's Job.
	Job string `json:"job"`
	// path is the run's directory in the claim: <subPath>/<run>.
	Path string `json:"path"`
	// phase of the run.
	Phase BackupPhase `json:"phase"`
	// startTime is when the Job started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when it ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// message says how the run ended, in the Job's words when it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// streamCount is how many streams the run holds.
	// +optional
	StreamCount int32 `json:"streamCount,omitempty"`
	// streams are the streams the run holds, each as it was at its
	// snapshot.
	// +optional
	// +listType=atomic
	Streams []BackupStream `json:"streams,omitempty"`
}

// BackupStream is a stream in a backup, as it was at its snapshot.
type BackupStream struct {
	// name of the stream.
	Name string `json:"name"`
	// messages, bytes, firstSeq and lastSeq are the stream's state at
	// the snapshot.
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
	// consumers is how many consumers the snapshot holds.
	// +optional
	Consumers int32 `json:"consumers,omitempty"`
	// dataBytes is the size of the snapshot written.
	DataBytes int64 `json:"dataBytes"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NatsBackupList is a list of NatsBackups.
type NatsBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NatsBackup `json:"items"`
}

// NatsRestore restores streams of a NatsBackup's run into a NatsCluster,
// into the account of the credentials given (the global account without
// them). It runs once, as a Job of the controller's image that reads the
// backup's claim. A stream that already exists in the account is refused,
// before any stream is restored, unless overwrite.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nr,categories=nats
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.backup`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 40",message="metadata.name must be a DNS label of at most 40 characters starting with a letter: it names the restore's Job"
type NatsRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to restore, from where, into what.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a NatsRestore cannot be changed: make another"
	Spec NatsRestoreSpec `json:"spec"`

	// status is how the restore went.
	// +optional
	Status NatsRestoreStatus `json:"status,omitempty"`
}

// NatsRestoreSpec is what a NatsRestore restores.
type NatsRestoreSpec struct {
	// cluster is the NatsCluster of this namespace restored into.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=49
	Cluster string `json:"cluster"`

	// backup is the NatsBackup of this namespace restored from: its
	// latest run that succeeded, unless run names another of its
	// catalogue.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	Backup string `json:"backup"`

	// run is the Job name of the run restored (status.runs[].job of the
	// NatsBackup); default its latest run that succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Run string `json:"run,omitempty"`

	// streams are the streams of the run to restore; empty, all of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=255
	Streams []string `json:"streams,omitempty"`

	// credentials are the creds file of a user of the account the streams
	// are restored into, from a Secret of this namespace; absent, the
	// global account of a cluster without auth.
	// +optional
	Credentials *SecretKeySelector `json:"credentials,omitempty"`

	// overwrite replaces streams of the same name in the account (each is
	// deleted, then restored). Without it a restore onto an existing
	// stream fails with StreamExists before anything is written.
	// +optional
	Overwrite bool `json:"overwrite,omitempty"`
}

// NatsRestoreStatus is how a NatsRestore went.
type NatsRestoreStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase of the restore.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// conditions: Complete (True once every stream is restored; False
	// with the reason it failed or cannot start).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// job is the restore's Job.
	// +optional
	Job string `json:"job,omitempty"`
	// path is the run's directory in the backup's claim.
	// +optional
	Path string `json:"path,omitempty"`
	// streams are the streams restored, each as the server reported it
	// once restored.
	// +optional
	// +listType=atomic
	Streams []BackupStream `json:"streams,omitempty"`
	// startTime and completionTime of the Job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NatsRestoreList is a list of NatsRestores.
type NatsRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NatsRestore `json:"items"`
}

// Condition type and reasons of NatsBackup and NatsRestore.
const (
	// ConditionComplete: True once a run (the restore) succeeded.
	ConditionComplete = "Complete"

	// ReasonBackupSucceeded / ReasonRestoreSucceeded: True.
	ReasonBackupSucceeded  = "BackupSucceeded"
	ReasonRestoreSucceeded = "RestoreSucceeded"
	// ReasonRunning: False while a Job runs.
	ReasonRunning = "Running"
	// ReasonJobFailed: False, the Job failed; the message is its own.
	ReasonJobFailed = "JobFailed"
	// ReasonStreamExists: False, a stream to restore is in the account
	// already and overwrite is not set; nothing was restored.
	ReasonStreamExists = "StreamExists"
	// ReasonClusterNotFound: False, spec.cluster names no NatsCluster.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonBackupNotFound: False, spec.backup names no NatsBackup, or
	// one without the run asked for.
	ReasonBackupNotFound = "BackupNotFound"
	// ReasonClaimNotFound: False, the backup's claim does not exist.
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonScheduled: a scheduled NatsBackup waiting for its first run.
	ReasonScheduled = "Scheduled"
	// ReasonBackupUnsupported: False, the cluster is one the Jobs cannot
	// reach yet (client TLS); nothing was started.
	ReasonBackupUnsupported = "Unsupported"
)
