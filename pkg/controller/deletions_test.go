package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// A pod the controller deleted is going until the cache shows it being
// deleted (then forgotten) or deletionSeenWithin passes; another pod of the
// same name (a new UID) is not.
func TestAPodTheControllerDeletedIsGoingUntilTheCacheShowsIt(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-2-0", UID: k8stypes.UID(uid)}}
	}
	d := &podDeletions{}
	if d.going(pod("a"), t0) {
		t.Error("a pod never deleted is going")
	}
	d.deleted("a", t0)
	if !d.going(pod("a"), t0.Add(time.Second)) {
		t.Error("the deleted pod, cache behind, is not going")
	}
	if d.going(pod("b"), t0.Add(time.Second)) {
		t.Error("the new pod of the same name is going")
	}
	if d.going(pod("a"), t0.Add(deletionSeenWithin+time.Second)) {
		t.Error("the deleted pod is still going after deletionSeenWithin")
	}
	d.deleted("c", t0)
	shown := pod("c")
	shown.DeletionTimestamp = &metav1.Time{Time: t0}
	if !d.going(shown, t0) {
		t.Error("a pod being deleted is not going")
	}
	if _, kept := d.uids["c"]; kept {
		t.Error("a deletion the cache shows is still remembered")
	}
	d.deleted("e", t0.Add(3*deletionSeenWithin))
	if _, kept := d.uids["a"]; kept || len(d.uids) != 1 {
		t.Errorf("old deletions are not forgotten: %v", d.uids)
	}
	var none *podDeletions
	if none.going(pod("a"), t0) {
		t.Error("without memory (kubectl nats plan) a running pod is going")
	}
}
