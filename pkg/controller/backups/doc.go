// Package backups is the controller of NatsBackups and NatsRestores. It
// runs beside the NatsCluster controller, in the same process and under
// the same leader election, on the same informer factories, with a queue
// of its own ("natsbackup").
//
// A NatsBackup's run, and a NatsRestore, is a Job of the controller's own
// image running `nats-operator backup` or `nats-operator restore`
// (pkg/backup): it connects to the cluster's servers as a client, with the
// creds file of the spec mounted from its Secret, and writes to or reads
// from the backup's PersistentVolumeClaim; the data never passes through
// the controller. A scheduled NatsBackup is a CronJob of that Job, so the
// schedule is kept by Kubernetes. When its pod ends, the Job's container
// leaves a report (pkg/backup.Report) as its termination message, which
// this controller reads from the pod's status into the NatsBackup's
// catalogue (status.runs) or the NatsRestore's status, with an Event.
//
// A sync reads the listers, builds the objects that should exist (job.go,
// pure), creates what is missing, and writes status only when it changed.
package backups
