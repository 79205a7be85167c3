package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

func TestOwnWrites(t *testing.T) {
	key := cache.ObjectName{Namespace: "nats", Name: "demo"}
	other := cache.ObjectName{Namespace: "nats", Name: "other"}
	t0 := time.Unix(1000, 0)
	w := newOwnWrites()

	if w.cacheBehind(key, "10", t0) {
		t.Fatal("nothing written yet, but the cache is said to be behind")
	}
	// An annotation patch replaced 10, then a status update replaced 11.
	w.wrote(key, "10", t0)
	w.wrote(key, "11", t0.Add(time.Millisecond))
	for _, rv := range []string{"10", "11"} {
		if !w.cacheBehind(key, rv, t0.Add(time.Second)) {
			t.Errorf("cache still at %s, replaced by our own write, but not said to be behind", rv)
		}
	}
	if w.cacheBehind(other, "11", t0.Add(time.Second)) {
		t.Error("another NatsCluster is said to be behind")
	}
	// The cache caught up: the record is dropped.
	if w.cacheBehind(key, "12", t0.Add(time.Second)) {
		t.Error("cache at 12, past both writes, said to be behind")
	}
	if w.cacheBehind(key, "11", t0.Add(time.Second)) {
		t.Error("after the cache caught up the record should be gone")
	}

	// A cache that never catches up is waited for at most cacheCatchUpLimit.
	w.wrote(key, "20", t0)
	if !w.cacheBehind(key, "20", t0.Add(cacheCatchUpLimit-time.Millisecond)) {
		t.Error("within the limit the cache should be waited for")
	}
	if w.cacheBehind(key, "20", t0.Add(cacheCatchUpLimit)) {
		t.Error("past the limit the sync should go on")
	}

	w.wrote(key, "30", t0)
	w.forget(key)
	if w.cacheBehind(key, "30", t0) {
		t.Error("forgotten key still said to be behind")
	}
}
