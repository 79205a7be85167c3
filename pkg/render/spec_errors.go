package render

import (
	"fmt"
	"strings"

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
	if pt := spec.PodTemplate; pt != nil {
		for _, c := range pt.Spec.Containers {
			if err := validateResources(c.Name, c.Resources); err != nil {
				return err
			}
		}
	}
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

// validateResources makes the API server's checks of a podTemplate
// container's resources (the CRD's rules for spec.resources would exceed
// CEL's cost budget on a list of containers): standard or extended
// resource names, no negative quantity, no request above its limit, and
// extended resources requested as much as their limit.
func validateResources(container string, r corev1.ResourceRequirements) error {
	field := "spec.podTemplate.spec.containers[name=" + container + "].resources"
	for part, list := range map[string]corev1.ResourceList{"limits": r.Limits, "requests": r.Requests} {
		for name, q := range list {
			n := string(name)
			standard := n == "cpu" || n == "memory" || n == "ephemeral-storage" || strings.HasPrefix(n, "hugepages-")
			extended := strings.Contains(n, "/") && !strings.HasPrefix(n, "kubernetes.io/") && !strings.HasPrefix(n, "requests.")
			if !standard && !extended {
				return &SpecError{Field: field + "." + part + "." + n, Message: "not a resource of containers: cpu, memory, ephemeral-storage, hugepages-<size> or an extended resource (example.com/gpu)"}
			}
			if q.Sign() < 0 {
				return &SpecError{Field: field + "." + part + "." + n, Message: q.String() + ": must not be negative"}
			}
		}
	}
	for name, req := range r.Requests {
		lim, ok := r.Limits[name]
		switch {
		case ok && req.Cmp(lim) > 0:
			return &SpecError{Field: field + ".requests." + string(name), Message: fmt.Sprintf("%s: must be less than or equal to the limit %s", req.String(), lim.String())}
		case strings.Contains(string(name), "/") && (!ok || req.Cmp(lim) != 0):
			return &SpecError{Field: field + ".requests." + string(name), Message: "an extended resource must be requested as much as its limit"}
		}
	}
	return nil
}
