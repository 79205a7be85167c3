package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// podWorker runs one pod from its binding to its removal:
//
//	acquire address -> set up volumes -> init containers in order ->
//	main containers (each restarting with backoff, probed) ->
//	on deletion: preStop, SIGTERM, SIGKILL after the grace period ->
//	final status -> delete the pod object with grace period 0.
//
// On Stop every process gets SIGKILL and the API is left alone.
type podWorker struct {
	n        *Node
	uid      types.UID
	ns, name string
	dir      string
	log      klog.Logger
	pokeCh   chan struct{}
	dirty    chan struct{}
	// terminating is closed when the pod is being deleted; grace is set
	// before.
	terminating chan struct{}

	// tokens are the service-account tokens of its projected volumes.
	tokens tokens

	// statusMu serialises status writes.
	statusMu sync.Mutex
	lastSent *corev1.PodStatus

	mu         sync.Mutex
	pod        *corev1.Pod
	ip         string
	grace      time.Duration
	startTime  metav1.Time
	initDone   bool
	waitReason string
	waitMsg    string
	inits      []*container
	containers []*container

	// The pod's /etc/hosts (dns.go), guarded by n.dnsMu.
	hostsOpen bool
	hostsData []byte
	hostsTime time.Time
}

func newPodWorker(n *Node, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		n:           n,
		uid:         pod.UID,
		ns:          pod.Namespace,
		name:        pod.Name,
		dir:         filepath.Join(n.opts.Root, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)),
		log:         n.log.WithValues("pod", klog.KObj(pod)),
		pokeCh:      make(chan struct{}, 1),
		dirty:       make(chan struct{}, 1),
		terminating: make(chan struct{}),
		pod:         pod.DeepCopy(),
		waitReason:  "ContainerCreating",
	}
	for i := range pod.Spec.InitContainers {
		w.inits = append(w.inits, &container{w: w, spec: &w.pod.Spec.InitContainers[i], init: true})
	}
	for i := range pod.Spec.Containers {
		w.containers = append(w.containers, &container{w: w, spec: &w.pod.Spec.Containers[i]})
	}
	// A pod that ran before (on an earlier run of this node) keeps counting
	// restarts from its reported status.
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		for _, c := range append(append([]*container(nil), w.inits...), w.containers...) {
			if c.spec.Name == cs.Name && (cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount > 0) {
				c.restartCount = cs.RestartCount
				c.everStarted = true
				c.state = cs.State
				if cs.State.Running != nil {
					c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 137, Reason: "Error", Message: "the node restarted",
						StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.Now(), ContainerID: cs.ContainerID,
					}}
				}
				c.lastState = cs.LastTerminationState
				c.containerID = cs.ContainerID
			}
		}
	}
	return w
}

// poke tells the worker the pod may have changed.
func (w *podWorker) poke() {
	select {
	case w.pokeCh <- struct{}{}:
	default:
	}
}

// markDirty asks for a status write.
func (w *podWorker) markDirty() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// current returns the pod as last seen, and whether it is gone (deleted, or
// replaced by another pod of the same name).
func (w *podWorker) current() (*corev1.Pod, bool) {
	p, err := w.n.pods.Pods(w.ns).Get(w.name)
	if err != nil || p.UID != w.uid {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.pod, true
	}
	w.mu.Lock()
	w.pod.ObjectMeta = *p.ObjectMeta.DeepCopy()
	w.pod.Status.Conditions = append([]corev1.PodCondition(nil), p.Status.Conditions...)
	w.pod.Status.QOSClass = p.Status.QOSClass
	pod := w.pod.DeepCopy()
	w.mu.Unlock()
	return pod, false
}

func (w *podWorker) containerPID(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range append(append([]*container(nil), w.inits...), w.containers...) {
		if c.spec.Name == name && c.cmd != nil && c.cmd.Process != nil {
			return c.cmd.Process.Pid
		}
	}
	return 0
}

// rewriter is the rewriter of container c of pod (nil for the pod's volume
// files), with binary for the command word of c's image.
func (w *podWorker) rewriter(pod *corev1.Pod, c *corev1.Container, binary string) *rewriter {
	r := &rewriter{podIP: w.ip, mounts: w.mounts(pod, c), binary: binary}
	if c != nil {
		r.command = w.n.commandWord(c.Image)
	}
	return r
}

// deletion returns whether the pod is being deleted or gone, and sets the
// grace period.
func (w *podWorker) deletion() (deleting, gone bool) {
	pod, gone := w.current()
	if !gone && pod.DeletionTimestamp == nil {
		return false, false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if !gone && pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	w.mu.Lock()
	w.grace = time.Duration(grace) * time.Second
	w.mu.Unlock()
	return true, gone
}

func (w *podWorker) run(ctx context.Context) {
	if !w.n.addrs.acquire(w.ns, w.name, ctx.Done()) {
		return
	}
	defer w.n.addrs.release(w.ns, w.name)
	w.mu.Lock()
	w.ip = w.n.addrs.get(w.ns, w.name)
	w.startTime = metav1.Now()
	w.mu.Unlock()
	w.log = w.log.WithValues("ip", w.ip)
	w.log.V(2).Info("Started pod worker")
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		w.log.Error(err, "Creating pod directory failed")
	}
	if err := w.openHosts(); err != nil {
		w.log.Error(err, "Writing /etc/hosts failed")
	}
	defer w.closeHosts()
	statusCtx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		w.statusLoop(statusCtx)
	}()
	defer func() {
		stopStatus()
		<-statusDone
	}()
	w.markDirty()

	var wg sync.WaitGroup
	defer wg.Wait()
	started := w.setUp(ctx)
	if started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.syncVolumesLoop(ctx)
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.runContainers(ctx)
		}()
	}
	// Wait for deletion (or Stop).
	for {
		if deleting, gone := w.deletion(); deleting {
			w.log.V(2).Info("Terminating pod", "gracePeriod", w.grace, "gone", gone)
			close(w.terminating)
			wg.Wait()
			if ctx.Err() != nil {
				return
			}
			if !gone {
				w.syncStatus(ctx)
				err := w.n.client.CoreV1().Pods(w.ns).Delete(ctx, w.name, metav1.DeleteOptions{
					GracePeriodSeconds: ptr.To[int64](0),
					Preconditions:      &metav1.Preconditions{UID: &w.uid},
				})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					w.log.Error(err, "Deleting pod failed")
				}
			}
			w.closeHosts()
			_ = os.RemoveAll(w.dir)
			w.log.V(2).Info("Removed pod")
			return
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-w.pokeCh:
		case <-time.After(2 * time.Second):
		}
	}
}

// setUp sets up the volumes, retrying until it succeeds; it returns false if
// the pod was deleted or the node stopped first.
func (w *podWorker) setUp(ctx context.Context) bool {
	for {
		if deleting, _ := w.deletion(); deleting || ctx.Err() != nil {
			return false
		}
		pod, _ := w.current()
		err := w.setUpVolumes(ctx, pod)
		if err == nil {
			w.mu.Lock()
			w.waitMsg = ""
			w.mu.Unlock()
			return true
		}
		w.mu.Lock()
		changed := w.waitMsg != err.Error()
		w.waitMsg = err.Error()
		w.mu.Unlock()
		if changed {
			var nr errNotReady
			if !errors.As(err, &nr) {
				w.log.Error(err, "Setting up volumes failed")
			}
			w.markDirty()
		}
		select {
		case <-ctx.Done():
			return false
		case <-w.pokeCh:
		case <-time.After(time.Second):
		}
	}
}

func (w *podWorker) syncVolumesLoop(ctx context.Context) {
	t := time.NewTicker(w.n.opts.SyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.terminating:
			return
		case <-t.C:
		}
		pod, gone := w.current()
		if gone {
			continue
		}
		changed, err := w.syncVolumes(pod)
		if len(changed) > 0 {
			w.log.V(2).Info("Updated volumes", "volumes", changed)
		}
		if err != nil {
			w.log.V(4).Info("Syncing volumes failed", "err", err)
		}
	}
}

// runContainers runs the init containers in order, then every container.
func (w *podWorker) runContainers(ctx context.Context) {
	for _, c := range w.inits {
		if !c.runInit(ctx) {
			return
		}
	}
	w.mu.Lock()
	w.initDone = true
	w.waitReason = ""
	w.mu.Unlock()
	w.markDirty()
	var wg sync.WaitGroup
	for _, c := range w.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runMain(ctx)
		}()
	}
	wg.Wait()
}

func (w *podWorker) isTerminating() bool {
	select {
	case <-w.terminating:
		return true
	default:
		return false
	}
}
