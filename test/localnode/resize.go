package localnode

// Volume expansion: the node plays the CSI external-resizer and the
// kubelet's file system resize for the claims it bound.
//
// What the kube-apiserver of the test bed (v1.37.2, hack/testbin.sh, started
// by test/testenv with no --enable/--disable-admission-plugins flags) does
// with a larger spec.resources.requests.storage, from
// plugin/pkg/admission/storage/persistentvolume/resize and
// pkg/apis/core/validation of k8s.io/kubernetes v1.37.2:
//
//   - The PersistentVolumeClaimResize admission plugin is in the default
//     enabled set (kube-apiserver --help lists it among the defaults of
//     --enable-admission-plugins), so it runs here as on a real cluster.
//   - It lets a claim grow only if the claim is Bound, else 403 "Only bound
//     persistent volume claims can be expanded" (not seen in practice:
//     validation refuses first, below), and only if the claim
//     names a StorageClass (the same before and after) that exists and has
//     allowVolumeExpansion: true, else 403 `persistentvolumeclaims "<name>"
//     is forbidden: only dynamically provisioned pvc can be resized and the
//     storageclass that provisions the pvc must support resize`. A claim
//     with no class can never grow.
//   - Validation runs before that plugin: for a claim not yet Bound, a new
//     request is refused with 422 "spec is immutable after creation except
//     resources.requests and volumeAttributesClassName for bound claims".
//     Shrinking below status.capacity is refused ("field can not be less
//     than status.capacity"; RecoverVolumeExpansionFailure is GA).
//
// Nothing in the API server resizes anything: on a real cluster the CSI
// external-resizer and the kubelet do, and this file does it here. The
// sequence of claim status writes is theirs (with RecoverVolumeExpansionFailure):
//
//  1. conditions [Resizing], allocatedResources.storage = the request,
//     allocatedResourceStatuses.storage = ControllerResizeInProgress;
//  2. the PersistentVolume's spec.capacity = the request;
//  3. conditions [FileSystemResizePending], allocatedResourceStatuses.storage =
//     NodeResizePending;
//  4. (kubelet, once a pod of this node uses the claim: at once if one runs
//     or is starting, else when the next one sets up its volumes, before
//     its containers start) allocatedResourceStatuses.storage =
//     NodeResizeInProgress;
//  5. status.capacity = the new size, allocatedResourceStatuses and the
//     resize conditions removed (allocatedResources stays).
//
// The steps follow one another at once, each a separate write, so a watcher
// sees every one. Running containers are left alone (online expansion);
// the claim directory has no size to change. No events are recorded.
//
// kube-controller-manager's expand controller (persistentvolume-expander)
// also watches claims whose request grows. For a hostPath volume it finds no
// expandable in-tree plugin and no CSI migration, so it records a Normal
// ExternalExpanding event "waiting for an external controller to expand this
// PVC" (TestClaimsGrowInPlaceWhenTheirStorageClassAllowsExpansion checks it
// and the refusals above) and leaves the claim and the volume alone (no annotation, no
// requeue). The PV controller sets status.capacity only when a claim becomes
// Bound, so it does not undo step 5 either. The pvc-protection controller
// writes the claim's Unused condition (PersistentVolumeClaimUnusedSinceTime,
// beta in 1.37) at any time; each write here starts from the latest status
// and keeps conditions other than the resize ones.

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// nodeLabel marks the PersistentVolumes a node made, with its name.
const nodeLabel = "localnode.nats-operator.io/node"

// fsResizePendingMessage is the message of the external-resizer's
// FileSystemResizePending condition.
const fsResizePendingMessage = "Waiting for user to (re-)start a pod to finish file system resize of volume on node."

// resizeConditions are the claim conditions the resizer and kubelet own.
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// wantsGrowth tells whether a Bound claim requests more than it has.
func wantsGrowth(c *corev1.PersistentVolumeClaim) bool {
	want, have := c.Spec.Resources.Requests[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
	return c.Status.Phase == corev1.ClaimBound && want.Cmp(have) > 0
}

// startResizer grows, one at a time, the claims bound to this node's
// volumes whose request exceeds their capacity. It stops with ctx.
func (n *Node) startResizer(ctx context.Context) error {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if c, ok := obj.(*corev1.PersistentVolumeClaim); ok && wantsGrowth(c) && strings.HasPrefix(c.Spec.VolumeName, "localnode-") {
			q.Add(c.Namespace + "/" + c.Name)
		}
	}
	_, err := n.factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return err
	}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		<-ctx.Done()
		q.ShutDown()
	}()
	go func() {
		defer n.wg.Done()
		for {
			key, shutdown := q.Get()
			if shutdown {
				return
			}
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			if err := n.growClaim(ctx, ns, name, false); err != nil && ctx.Err() == nil {
				n.log.Error(err, "Growing claim failed", "claim", key)
				q.AddRateLimited(key)
			} else {
				q.Forget(key)
			}
			q.Done(key)
		}
	}()
	return nil
}

// growClaim takes a claim of this node whose request exceeds its capacity
// through the steps of the external-resizer and, if mounting or a pod of
// this node uses the claim, of the kubelet. It starts from whatever step the
// claim's status shows, so a node restarted mid-way finishes the job.
func (n *Node) growClaim(ctx context.Context, ns, name string, mounting bool) error {
	n.resizeMu.Lock()
	defer n.resizeMu.Unlock()
	claim, err := n.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && !wantsGrowth(claim)) {
		return nil
	}
	if err != nil {
		return err
	}
	pvs := n.client.CoreV1().PersistentVolumes()
	pv, err := pvs.Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pv.Labels[nodeLabel] != n.opts.NodeName || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
		return nil
	}
	if ok, err := n.classAllowsExpansion(ctx, claim); !ok {
		return err
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	step := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]
	onNode := step == corev1.PersistentVolumeClaimNodeResizePending || step == corev1.PersistentVolumeClaimNodeResizeInProgress
	if !onNode {
		// The external-resizer; while the node has not finished, a newer
		// request waits for it, as there.
		if size.Cmp(want) < 0 {
			claim, err = n.updateClaimStatus(ctx, claim, func(s *corev1.PersistentVolumeClaimStatus) {
				setResizeCondition(s, corev1.PersistentVolumeClaimResizing, "")
				if s.AllocatedResources == nil {
					s.AllocatedResources = corev1.ResourceList{}
				}
				s.AllocatedResources[corev1.ResourceStorage] = want
				setResizeStep(s, corev1.PersistentVolumeClaimControllerResizeInProgress)
			})
			if err != nil {
				return err
			}
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				p.Spec.Capacity[corev1.ResourceStorage] = want
				_, err = pvs.Update(ctx, p, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				return err
			}
			size = want
		}
		claim, err = n.updateClaimStatus(ctx, claim, func(s *corev1.PersistentVolumeClaimStatus) {
			setResizeCondition(s, corev1.PersistentVolumeClaimFileSystemResizePending, fsResizePendingMessage)
			setResizeStep(s, corev1.PersistentVolumeClaimNodeResizePending)
		})
		if err != nil {
			return err
		}
	}
	// The kubelet: online expansion for a pod that uses the claim, or
	// expansion at mount for the next one.
	if !mounting && !n.claimInUse(ns, name) {
		return nil
	}
	claim, err = n.updateClaimStatus(ctx, claim, func(s *corev1.PersistentVolumeClaimStatus) {
		setResizeStep(s, corev1.PersistentVolumeClaimNodeResizeInProgress)
	})
	if err != nil {
		return err
	}
	_, err = n.updateClaimStatus(ctx, claim, func(s *corev1.PersistentVolumeClaimStatus) {
		s.Capacity[corev1.ResourceStorage] = size
		delete(s.AllocatedResourceStatuses, corev1.ResourceStorage)
		if len(s.AllocatedResourceStatuses) == 0 {
			s.AllocatedResourceStatuses = nil
		}
		setResizeCondition(s, "", "")
	})
	return err
}

// classAllowsExpansion tells whether the claim's StorageClass, if it names
// one, exists and has allowVolumeExpansion: true. The API server has already
// refused growth otherwise; this covers a class deleted or changed since. A
// claim naming no class cannot grow through PersistentVolumeClaimResize;
// should an API server without that plugin let one grow, the node grows it,
// as the external-resizer (which reads no classes) would.
func (n *Node) classAllowsExpansion(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName == "" {
		return true, nil
	}
	sc, err := n.client.StorageV1().StorageClasses().Get(ctx, *claim.Spec.StorageClassName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion, nil
}

// claimInUse tells whether a pod of this node that is not being deleted
// mounts the claim ns/name.
func (n *Node) claimInUse(ns, name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.workers {
		if w.ns != ns || w.isTerminating() {
			continue
		}
		w.mu.Lock()
		vols := w.pod.Spec.Volumes
		w.mu.Unlock()
		for _, v := range vols {
			if (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name) || (v.Ephemeral != nil && w.name+"-"+v.Name == name) {
				return true
			}
		}
	}
	return false
}

// updateClaimStatus applies mutate to the latest status of the claim and
// writes it, retrying on conflicts; it returns the written claim.
func (n *Node) updateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, mutate func(*corev1.PersistentVolumeClaimStatus)) (*corev1.PersistentVolumeClaim, error) {
	claims := n.client.CoreV1().PersistentVolumeClaims(claim.Namespace)
	out := claim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.UID != claim.UID {
			return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), claim.Name)
		}
		if c.Status.Capacity == nil {
			c.Status.Capacity = corev1.ResourceList{}
		}
		mutate(&c.Status)
		out, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// setResizeCondition replaces the resize conditions with one of type t (none
// if t is empty), keeping the others; an unchanged condition keeps its time.
func setResizeCondition(s *corev1.PersistentVolumeClaimStatus, t corev1.PersistentVolumeClaimConditionType, msg string) {
	var kept []corev1.PersistentVolumeClaimCondition
	var found bool
	for _, c := range s.Conditions {
		switch {
		case c.Type == t && c.Status == corev1.ConditionTrue:
			found = true
			kept = append(kept, c)
		case !resizeConditions[c.Type]:
			kept = append(kept, c)
		}
	}
	if t != "" && !found {
		kept = append(kept, corev1.PersistentVolumeClaimCondition{
			Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: msg,
		})
	}
	s.Conditions = kept
}

// setResizeStep sets allocatedResourceStatuses.storage.
func setResizeStep(s *corev1.PersistentVolumeClaimStatus, step corev1.ClaimResourceStatus) {
	if s.AllocatedResourceStatuses == nil {
		s.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	s.AllocatedResourceStatuses[corev1.ResourceStorage] = step
}
