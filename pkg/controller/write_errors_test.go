package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestWriteErrorsTellRefusalsFromTransientFailures(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "nats", Name: "demo-0-config"}}
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"an invalid object is refused", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "demo-0", field.ErrorList{field.Required(field.NewPath("spec"), "x")}), true},
		{"an admission denial is refused", apierrors.NewForbidden(gr, "demo-0", errors.New("denied by policy")), true},
		{"a bad request is refused", apierrors.NewBadRequest("bad"), true},
		{"a conflict is transient", apierrors.NewConflict(gr, "demo-0", errors.New("modified")), false},
		{"a server timeout is transient", apierrors.NewServerTimeout(gr, "create", 1), false},
		{"an unavailable API server is transient", apierrors.NewServiceUnavailable("down"), false},
		{"too many requests is transient", apierrors.NewTooManyRequests("slow down", 1), false},
		{"a connection error is transient", errors.New("dial tcp: connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := writeError("creating", "ConfigMap", cm, tc.err)
			var wre *writeRefusedError
			if got := errors.As(err, &wre); got != tc.refused {
				t.Fatalf("refused = %v, want %v: %v", got, tc.refused, err)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not wrap %v", err, tc.err)
			}
		})
	}
}
