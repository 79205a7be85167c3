package backups

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/pkg/controller"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	natsscheme "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/scheme"
	clusterlisters "github.com/nats-operator/nats-operator/pkg/generated/listers/cluster/v1beta1"
)

// QueueName names the workqueue; its metrics carry name="natsbackup".
const QueueName = "natsbackup"

// DefaultImage is the image the Jobs run: the controller's own, as
// manifests/controller/operator.yaml names it (--job-image).
const DefaultImage = "ghcr.io/nats-operator/nats-operator:v0.1.0"

// Kinds of the queue's keys.
const (
	kindBackup  = "NatsBackup"
	kindRestore = "NatsRestore"
)

// key is a NatsBackup or a NatsRestore.
type key struct {
	Kind string
	cache.ObjectName
}

// Controller reconciles NatsBackups and NatsRestores.
type Controller struct {
	// kube creates Jobs and CronJobs and emits Events; nats writes the
	// status of NatsBackups and NatsRestores.
	kube kubernetes.Interface
	nats versioned.Interface

	backups  clusterlisters.NatsBackupLister
	restores clusterlisters.NatsRestoreLister
	clusters clusterlisters.NatsClusterLister
	jobs     batchlisters.JobLister
	cronJobs batchlisters.CronJobLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced

	queue    workqueue.TypedRateLimitingInterface[key]
	recorder record.EventRecorder
	// image is the image of the Jobs (--job-image).
	image string
}

// Options are what New builds the controller from.
type Options struct {
	KubeClient kubernetes.Interface
	NatsClient versioned.Interface
	// Informers are the NatsCluster controller's (NatsClusters,
	// NatsBackups, NatsRestores, and the pods, labelled managed-by as the
	// Jobs' pods are); Jobs those of the Jobs and CronJobs.
	Informers controller.Informers
	Jobs      controller.BackupInformers
	// Image is the image the Jobs run; DefaultImage when empty.
	Image string
}

// New builds the controller and registers its event handlers.
func New(ctx context.Context, o Options) *Controller {
	utilruntime.Must(natsscheme.AddToScheme(scheme.Scheme))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: o.KubeClient.CoreV1().Events("")})
	c := &Controller{
		kube: o.KubeClient, nats: o.NatsClient,
		backups: o.Informers.Backups.Lister(), restores: o.Informers.Restores.Lister(), clusters: o.Informers.Clusters.Lister(),
		jobs: o.Jobs.Jobs.Lister(), cronJobs: o.Jobs.CronJobs.Lister(), pods: o.Informers.Pods.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: QueueName}),
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nats-operator"}),
		image:    o.Image,
	}
	if c.image == "" {
		c.image = DefaultImage
	}
	add := func(kind string) func(obj any) {
		return func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				c.queue.Add(key{kind, cache.MetaObjectToName(m)})
			}
		}
	}
	// A Job, CronJob or pod enqueues the NatsBackup or NatsRestore its
	// labels name.
	byLabel := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if n := m.GetLabels()[LabelBackup]; n != "" {
			c.queue.Add(key{kindBackup, cache.NewObjectName(m.GetNamespace(), n)})
		}
		if n := m.GetLabels()[LabelRestore]; n != "" {
			c.queue.Add(key{kindRestore, cache.NewObjectName(m.GetNamespace(), n)})
		}
	}
	// A NatsCluster (created, changed) enqueues what waits on it.
	byCluster := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if bs, err := c.backups.NatsBackups(m.GetNamespace()).List(everything()); err == nil {
			for _, b := range bs {
				if b.Spec.Cluster == m.GetName() {
					c.queue.Add(key{kindBackup, cache.MetaObjectToName(b)})
				}
			}
		}
		if rs, err := c.restores.NatsRestores(m.GetNamespace()).List(everything()); err == nil {
			for _, r := range rs {
				if r.Spec.Cluster == m.GetName() {
					c.queue.Add(key{kindRestore, cache.MetaObjectToName(r)})
				}
			}
		}
	}
	// A NatsBackup also enqueues the restores that name it.
	backupChanged := func(obj any) {
		add(kindBackup)(obj)
		if m, ok := obj.(metav1.Object); ok {
			if rs, err := c.restores.NatsRestores(m.GetNamespace()).List(everything()); err == nil {
				for _, r := range rs {
					if r.Spec.Backup == m.GetName() {
						c.queue.Add(key{kindRestore, cache.MetaObjectToName(r)})
					}
				}
			}
		}
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  func(any)
	}{
		{o.Informers.Backups.Informer(), backupChanged},
		{o.Informers.Restores.Informer(), add(kindRestore)},
		{o.Jobs.Jobs.Informer(), byLabel},
		{o.Jobs.CronJobs.Informer(), byLabel},
		{o.Informers.Pods.Informer(), byLabel},
		{o.Informers.Clusters.Informer(), byCluster},
	} {
		_, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: h.fn, UpdateFunc: func(_, n any) { h.fn(n) }, DeleteFunc: h.fn,
		})
		utilruntime.Must(err)
		c.synced = append(c.synced, h.inf.HasSynced)
	}
	return c
}

// Run waits for the caches, then runs workers until ctx is done, and
// drains them.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDownWithDrain()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return fmt.Errorf("waiting for the caches of the %s controller", QueueName)
	}
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	k, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(k)
	logger := klog.FromContext(ctx).WithValues(k.Kind, klog.KRef(k.Namespace, k.Name))
	ctx = klog.NewContext(ctx, logger)
	var err error
	if k.Kind == kindBackup {
		err = c.syncBackup(ctx, k.ObjectName)
	} else {
		err = c.syncRestore(ctx, k.ObjectName)
	}
	switch {
	case err == nil:
		c.queue.Forget(k)
	case apierrors.IsConflict(err):
		c.queue.Add(k)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing failed")
		c.queue.AddRateLimited(k)
	}
	return true
}

// createdOrThere is nil for a create that succeeded or found the object
// there already (made by an earlier sync the cache has not shown yet).
func createdOrThere(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// jobPod is the newest pod of a Job, whose container leaves the run's
// report as its termination message.
func (c *Controller) jobPod(j *batchv1.Job) *corev1.Pod {
	pods, err := c.pods.Pods(j.Namespace).List(selector(labelJobName, j.Name))
	if err != nil || len(pods) == 0 {
		return nil
	}
	latest := pods[0]
	for _, p := range pods[1:] {
		if p.CreationTimestamp.After(latest.CreationTimestamp.Time) {
			latest = p
		}
	}
	return latest
}
