package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// cacheCatchUp is the shortest wait before a reload is looked at again.
const cacheCatchUp = 100 * time.Millisecond

// cacheBehindRequeue is how soon a sync that found the cache behind the
// controller's own last write looks again if nothing else brings it: the
// informer's event for that write enqueues the cluster as soon as the
// cache holds it (an event during the sync makes the queue hand the key out
// again once the sync is done), so this is only a fallback. It was 100 ms,
// a spin: with 100 clusters changed at once, 2,220 syncs of a 40 s fleet
// change found the cache behind, each one of them again 100 ms later.
const cacheBehindRequeue = time.Second

// cacheCatchUpLimit bounds the wait for the cache: past it the sync goes on
// with what the cache holds, and a stale write fails with a conflict as it
// would without this guard.
const cacheCatchUpLimit = 10 * time.Second

// ownWrites remembers, per NatsCluster, the resourceVersions that the
// controller's own writes (status updates, annotation patches) replaced,
// until the informer's cache has moved past them. A sync that read one of
// them from the cache would plan on a status.rollout it has already
// overwritten, and its status write would fail with a conflict; it waits
// for the cache instead. The cache only moves forward, so a
// resourceVersion not in the set is newer than every write remembered.
type ownWrites struct {
	mu sync.Mutex
	m  map[cache.ObjectName]*replaced
}

type replaced struct {
	versions []string
	at       time.Time // of the latest write
}

func newOwnWrites() *ownWrites {
	return &ownWrites{m: map[cache.ObjectName]*replaced{}}
}

// wrote records that a write at now replaced resourceVersion rv of key.
func (w *ownWrites) wrote(key cache.ObjectName, rv string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.m[key]
	if r == nil {
		r = &replaced{}
		w.m[key] = r
	}
	if !slices.Contains(r.versions, rv) {
		r.versions = append(r.versions, rv)
	}
	r.at = now
}

// cacheBehind reports whether rv, read from the cache at now, is one the
// controller's own writes replaced less than cacheCatchUpLimit ago. Once
// the cache has moved past them, or the limit has passed, the record is
// dropped.
func (w *ownWrites) cacheBehind(key cache.ObjectName, rv string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.m[key]
	if r == nil {
		return false
	}
	if slices.Contains(r.versions, rv) && now.Sub(r.at) < cacheCatchUpLimit {
		return true
	}
	delete(w.m, key)
	return false
}

// forget drops what is remembered of key (the NatsCluster is gone).
func (w *ownWrites) forget(key cache.ObjectName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
