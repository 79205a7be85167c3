package nsinformers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// fakeNamespace serves one namespace: its list, the options of every call,
// and a fake watch per Watch call.
type fakeNamespace struct {
	items   []corev1.ConfigMap
	rv      string
	lists   []metav1.ListOptions
	watches []metav1.ListOptions
	fakes   []*watch.FakeWatcher
}

func (f *fakeNamespace) lw() cache.ListerWatcher {
	return &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			f.lists = append(f.lists, o)
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: f.rv}, Items: f.items}, nil
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			f.watches = append(f.watches, o)
			w := watch.NewFakeWithChanSize(10, false)
			f.fakes = append(f.fakes, w)
			return w, nil
		},
	}
}

func cm(ns, name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return watch.Event{}
}

func TestMergedListIsOneSnapshotAndWatchResumesEachNamespace(t *testing.T) {
	a := &fakeNamespace{rv: "100", items: []corev1.ConfigMap{*cm("a", "x", "90")}}
	b := &fakeNamespace{rv: "100", items: []corev1.ConfigMap{*cm("b", "y", "95"), *cm("b", "z", "99")}}
	fakes := map[string]*fakeNamespace{"a": a, "b": b}
	lw := ListerWatcher([]string{"a", "b"}, func(ns string) cache.ListerWatcher { return fakes[ns].lw() })

	obj, err := lw.List(metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	list := obj.(*corev1.ConfigMapList)
	if len(list.Items) != 3 || list.ResourceVersion != "100" {
		t.Fatalf("merged list has %d items at %q, want 3 at 100", len(list.Items), list.ResourceVersion)
	}
	if o := a.lists[0]; o.ResourceVersion != "0" || o.Limit != 0 || o.ResourceVersionMatch != "" {
		t.Errorf("first namespace listed with %+v, want as asked without paging", o)
	}
	if o := b.lists[0]; o.ResourceVersion != "100" || o.ResourceVersionMatch != metav1.ResourceVersionMatchExact {
		t.Errorf("second namespace listed with %+v, want exactly at 100", o)
	}

	w, err := lw.Watch(metav1.ListOptions{ResourceVersion: "100"})
	if err != nil {
		t.Fatal(err)
	}
	if a.watches[0].ResourceVersion != "100" || b.watches[0].ResourceVersion != "100" {
		t.Fatalf("watches start at %q and %q, want 100", a.watches[0].ResourceVersion, b.watches[0].ResourceVersion)
	}
	a.fakes[0].Add(cm("a", "x2", "120"))
	if ev := next(t, w); ev.Object.(*corev1.ConfigMap).Name != "x2" {
		t.Fatalf("got %v", ev)
	}
	b.fakes[0].Modify(cm("b", "y", "110"))
	if ev := next(t, w); ev.Object.(*corev1.ConfigMap).Name != "y" {
		t.Fatalf("got %v", ev)
	}
	// One namespace's watch ending ends the merged one.
	a.fakes[0].Stop()
	for range w.ResultChan() {
	}

	// The reflector resumes from the last resourceVersion it was given
	// (110, from b): a resumes from 120, b from 110.
	w, err = lw.Watch(metav1.ListOptions{ResourceVersion: "110"})
	if err != nil {
		t.Fatal(err)
	}
	if a.watches[1].ResourceVersion != "120" || b.watches[1].ResourceVersion != "110" {
		t.Errorf("resumed at a=%q b=%q, want a=120 b=110", a.watches[1].ResourceVersion, b.watches[1].ResourceVersion)
	}
	w.Stop()
	for range w.ResultChan() {
	}

	// Any other resourceVersion makes the reflector list again.
	if _, err := lw.Watch(metav1.ListOptions{ResourceVersion: "105"}); !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from an unknown resourceVersion: %v, want 410 Expired", err)
	}
}

func TestOneNamespaceIsItsOwnListerWatcher(t *testing.T) {
	a := &fakeNamespace{rv: "7"}
	lw := ListerWatcher([]string{"a"}, func(string) cache.ListerWatcher { return a.lw() })
	if _, ok := lw.(*merged); ok {
		t.Fatal("one namespace got a merged ListerWatcher")
	}
}
