package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletionSeenWithin is how long a pod the controller deleted is taken as
// going while the pod cache still shows it running. Past it, the cache is
// believed: a deletion the API server accepted shows in a watch well within
// it.
const deletionSeenWithin = 2 * time.Minute

// podDeletions remembers the pods (by UID) the controller deleted until its
// pod cache shows them going: the cache is behind the API server by its
// watch, and a sync that runs in between (the step's own status write
// brings one) would see the old pod running, not being deleted, from the
// template before its StatefulSet's, and take the step again
// (PodBehindTemplate): seen in the fleet bench as 692 pod deletions for 100
// steps. Kept in memory only, like the workqueue's own expectations: a
// controller that starts lists its caches afresh, and sees what the API
// server has.
type podDeletions struct {
	mu   sync.Mutex
	uids map[types.UID]time.Time
}

// deleted records the deletion of a pod at now, and forgets deletions older
// than deletionSeenWithin.
func (d *podDeletions) deleted(uid types.UID, now time.Time) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uids == nil {
		d.uids = map[types.UID]time.Time{}
	}
	for u, at := range d.uids {
		if now.Sub(at) > deletionSeenWithin {
			delete(d.uids, u)
		}
	}
	d.uids[uid] = now
}

// going says whether pod, as the cache has it, is going: being deleted, or
// deleted by the controller within deletionSeenWithin and not shown so yet.
// A pod the cache shows being deleted is forgotten.
func (d *podDeletions) going(pod *corev1.Pod, now time.Time) bool {
	if pod == nil {
		return false
	}
	if pod.DeletionTimestamp != nil {
		if d != nil {
			d.mu.Lock()
			delete(d.uids, pod.UID)
			d.mu.Unlock()
		}
		return true
	}
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.uids[pod.UID]
	if ok && now.Sub(at) > deletionSeenWithin {
		delete(d.uids, pod.UID)
		return false
	}
	return ok
}
