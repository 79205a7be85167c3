package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// SpecError is a spec the CRD accepted that cannot render into objects the
// API server accepts: a check the CRD schema cannot make (a CEL rule over a
// core/v1 list has no bound, so its cost exceeds the API server's budget).
// The controller turns it into Progressing=False InvalidSpec; nothing is
// written.
type SpecError struct {
	// Field is the path of the offending field, e.g.
	// spec.jetstream.volumeClaimTemplate.spec.accessModes[0].
	Field string
	// Message says what is wrong and what is allowed.
	Message string
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Message }

// validAccessModes are the access modes a claim may ask for.
var validAccessModes = []corev1.PersistentVolumeAccessMode{
	corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod,
}

// validateSpec makes the checks of the spec the CRD schema does not.
func validateSpec(spec *clusterv1beta1.NatsClusterSpec) error {
	if js := spec.JetStream; js != nil && js.VolumeClaimTemplate != nil {
		if q, ok := js.VolumeClaimTemplate.Spec.Resources.Requests[corev1.ResourceStorage]; ok && q.Sign() <= 0 {
			return &SpecError{
				Field:   "spec.jetstream.volumeClaimTemplate.spec.resources.requests.storage",
				Message: fmt.Sprintf("%s: the storage request must be greater than zero", q.String()),
			}
		}
	modes:
		for i, m := range js.VolumeClaimTemplate.Spec.AccessModes {
			for _, v := range validAccessModes {
				if m == v {
					continue modes
				}
			}
			return &SpecError{
				Field:   fmt.Sprintf("spec.jetstream.volumeClaimTemplate.spec.accessModes[%d]", i),
				Message: fmt.Sprintf("unsupported access mode %q: must be ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod", m),
			}
		}
	}
	return nil
}
