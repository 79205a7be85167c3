package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// SecretsResource is what the metadata-only Secrets informer watches.
var SecretsResource = corev1.SchemeGroupVersion.WithResource("secrets")

// StripSecretMetadata is the transform of the Secrets metadata informer: it
// keeps what the controller needs to know a Secret exists and changed
// (name, namespace, resourceVersion, UID, labels, owners) and drops the
// rest before it is cached: annotations (kubectl apply keeps a Secret's
// whole manifest, values included, in last-applied-configuration) and
// managed fields.
func StripSecretMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.Annotations = nil
		m.ManagedFields = nil
	}
	return obj, nil
}

// secretReader reads the Secrets a NatsCluster names, by name, and only
// those: the informer caches every Secret's metadata (see
// StripSecretMetadata) for change notification, and a Secret's values are
// fetched with a GET when it is first read and again when its metadata
// shows a new resourceVersion. No other Secret's values are ever requested
// or held.
type secretReader struct {
	client kubernetes.Interface
	meta   cache.GenericLister

	mu     sync.Mutex
	values map[cache.ObjectName]*corev1.Secret
	// read is when each held Secret was last read: values not read for
	// secretValuesUnread (no cluster names the Secret any more, or its
	// cluster is gone) are dropped.
	read map[cache.ObjectName]time.Time
	now  func() time.Time
}

// secretValuesUnread is how long the values of a Secret no sync reads are
// held: every cluster is synced at least every DefaultRestRequeue (and
// every informer resync), and reads the Secrets it names each time.
const secretValuesUnread = 15 * time.Minute

func newSecretReader(client kubernetes.Interface, meta cache.GenericLister) *secretReader {
	return &secretReader{client: client, meta: meta, values: map[cache.ObjectName]*corev1.Secret{},
		read: map[cache.ObjectName]time.Time{}, now: time.Now}
}

// touch records a read of key at now and drops the values unread for
// secretValuesUnread. Called with r.mu held.
func (r *secretReader) touch(key cache.ObjectName, now time.Time) {
	r.read[key] = now
	for k, t := range r.read {
		if now.Sub(t) > secretValuesUnread {
			delete(r.read, k)
			delete(r.values, k)
		}
	}
}

// secretGetTimeout bounds one read of a Secret by name.
const secretGetTimeout = 10 * time.Second

// namespacedSecrets reads the Secrets of one namespace.
type namespacedSecrets struct {
	r  *secretReader
	ns string
}

// Secrets reads in namespace ns (as a lister's Secrets(ns) does).
func (r *secretReader) Secrets(ns string) namespacedSecrets { return namespacedSecrets{r, ns} }

// Get returns the Secret, a NotFound error when the metadata cache holds no
// such Secret. The object is shared: callers must not modify it.
func (n namespacedSecrets) Get(name string) (*corev1.Secret, error) {
	r := n.r
	obj, err := r.meta.ByNamespace(n.ns).Get(name)
	if err != nil {
		return nil, err
	}
	rv := resourceVersionOf(obj)
	key := cache.ObjectName{Namespace: n.ns, Name: name}
	r.mu.Lock()
	s, ok := r.values[key]
	r.touch(key, r.now())
	r.mu.Unlock()
	if ok && rv != "" && s.ResourceVersion == rv {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), secretGetTimeout)
	defer cancel()
	s, err = r.client.CoreV1().Secrets(n.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.values[key] = s
	r.read[key] = r.now()
	r.mu.Unlock()
	return s, nil
}

// forget drops the values of a deleted Secret.
func (r *secretReader) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		key := cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}
		r.mu.Lock()
		delete(r.values, key)
		delete(r.read, key)
		r.mu.Unlock()
	}
}

// held is the number of Secrets whose values are held (for tests).
func (r *secretReader) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.values)
}

func resourceVersionOf(obj runtime.Object) string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetResourceVersion()
	}
	return ""
}
