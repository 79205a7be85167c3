package nsinformers

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher returns one ListerWatcher over namespaces, built from one
// per namespace by perNamespace. With a single namespace (or "", all) it is
// that namespace's own.
func ListerWatcher(namespaces []string, perNamespace func(namespace string) cache.ListerWatcher) cache.ListerWatcher {
	if len(namespaces) == 1 {
		return perNamespace(namespaces[0])
	}
	m := &merged{namespaces: namespaces, lws: map[string]cache.ListerWatcher{}}
	for _, ns := range namespaces {
		m.lws[ns] = perNamespace(ns)
	}
	return m
}

type merged struct {
	namespaces []string
	lws        map[string]cache.ListerWatcher

	mu sync.Mutex
	// last is the resourceVersion last given to the caller (of the list or
	// of the last event forwarded); pos is each namespace's own.
	last string
	pos  map[string]string
}

var _ cache.ListerWatcher = (*merged)(nil)

// IsWatchListSemanticsUnSupported tells the reflector to list and watch
// (client-go's watchlist.DoesClientNotSupportWatchListSemantics).
func (m *merged) IsWatchListSemanticsUnSupported() bool { return true }

// List lists every namespace at one resourceVersion. Paging is not passed
// on: each namespace is listed whole.
func (m *merged) List(options metav1.ListOptions) (runtime.Object, error) {
	options.Limit, options.Continue = 0, ""
	var first runtime.Object
	var items []runtime.Object
	rv := ""
	for i, ns := range m.namespaces {
		opts := options
		if i > 0 {
			opts.ResourceVersion, opts.ResourceVersionMatch = rv, metav1.ResourceVersionMatchExact
		}
		list, err := m.lws[ns].List(opts)
		if err != nil {
			return nil, fmt.Errorf("listing namespace %s: %w", ns, err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		items = append(items, objs...)
		if i == 0 {
			first = list
			acc, err := meta.ListAccessor(list)
			if err != nil {
				return nil, err
			}
			rv = acc.GetResourceVersion()
		}
	}
	if err := meta.SetList(first, items); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.last = rv
	m.pos = map[string]string{}
	for _, ns := range m.namespaces {
		m.pos[ns] = rv
	}
	m.mu.Unlock()
	return first, nil
}

// Watch watches every namespace from where its events were left.
func (m *merged) Watch(options metav1.ListOptions) (watch.Interface, error) {
	m.mu.Lock()
	pos := map[string]string{}
	resume := m.pos != nil && options.ResourceVersion == m.last
	for ns, rv := range m.pos {
		pos[ns] = rv
	}
	m.mu.Unlock()
	if !resume {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("watching namespaces %v from resourceVersion %q: the merged watch resumes only from the last resourceVersion it delivered", m.namespaces, options.ResourceVersion))
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &mergedWatch{out: make(chan watch.Event), cancel: cancel}
	var inner []watch.Interface
	for _, ns := range m.namespaces {
		opts := options
		opts.ResourceVersion = pos[ns]
		iw, err := m.lws[ns].Watch(opts)
		if err != nil {
			cancel()
			for _, x := range inner {
				x.Stop()
			}
			return nil, fmt.Errorf("watching namespace %s: %w", ns, err)
		}
		inner = append(inner, iw)
	}
	var wg sync.WaitGroup
	for i, ns := range m.namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel() // one namespace's watch ending ends them all
			m.forward(ctx, ns, inner[i], w.out)
		}()
	}
	go func() {
		<-ctx.Done()
		for _, x := range inner {
			x.Stop()
		}
		wg.Wait()
		close(w.out)
	}()
	return w, nil
}

// forward sends one namespace's events on out, recording the
// resourceVersion of each once it is delivered.
func (m *merged) forward(ctx context.Context, ns string, in watch.Interface, out chan<- watch.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-in.ResultChan():
			if !ok {
				return
			}
			rv := ""
			if ev.Type != watch.Error {
				if acc, err := meta.Accessor(ev.Object); err == nil {
					rv = acc.GetResourceVersion()
				}
			}
			// Deliver and record under the lock, so what is recorded is
			// exactly what the caller has seen, in its order.
			m.mu.Lock()
			select {
			case out <- ev:
				if rv != "" {
					m.pos[ns], m.last = rv, rv
				}
				m.mu.Unlock()
			case <-ctx.Done():
				m.mu.Unlock()
				return
			}
		}
	}
}

type mergedWatch struct {
	out    chan watch.Event
	cancel context.CancelFunc
}

func (w *mergedWatch) Stop()                          { w.cancel() }
func (w *mergedWatch) ResultChan() <-chan watch.Event { return w.out }
