package controller

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
)

// writeRefusedError is a write of a rendered object that the API server
// refused for what the object is, not for a passing state of the cluster:
// invalid, denied by an admission rule or RBAC, over a quota, too large.
// Writing the same object again cannot succeed until the spec or the policy
// changes, so it becomes Progressing=False ReconcileFailed with the API
// server's words, not a retry with backoff. Conflicts, timeouts and
// unavailable servers stay transient errors (retried, status untouched).
type writeRefusedError struct {
	verb, kind string
	obj        klog.ObjectRef
	err        error
}

func (e *writeRefusedError) Error() string {
	return fmt.Sprintf("%s %s %s was refused by the API server: %v; fix the NatsCluster spec or the policy that refuses it (the controller tries again on every change, and every 30s)",
		e.verb, e.kind, e.obj, e.err)
}

func (e *writeRefusedError) Unwrap() error { return e.err }

// refused reports whether err is the API server refusing an object as it
// is, rather than a transient failure.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}

// writeError wraps the error of writing obj: a writeRefusedError when the API
// server refused it, otherwise the error with what was written, for retry.
// verb is "creating", "updating" or "deleting".
func writeError(verb, kind string, obj klog.KMetadata, err error) error {
	if refused(err) {
		return &writeRefusedError{verb: verb, kind: kind, obj: klog.KObj(obj), err: err}
	}
	return fmt.Errorf("%s %s %s: %w", verb, kind, klog.KObj(obj), err)
}
