package render

// The CRD's own rules, checked again on what the API server hands the
// controller. A NatsCluster stored before a rule existed (an older CRD, or
// one applied without validation) reaches the controller as it is; rendered,
// it would make servers nats-server refuses to start, or objects the API
// server refuses. Each rule here mirrors one of the CRD (its CEL rules and
// the schema's patterns, enums and bounds) with the same field and words, so
// such an object is held InvalidSpec and no server is touched.
// test/crd's TestEverySpecTheCRDRefusesIsInvalidSpecWhenStored runs every
// spec the CRD refuses through Render.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

var (
	clusterNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	semverRE      = regexp.MustCompile(`^(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)
	digestRE      = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	domainRE      = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	keyNameRE     = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

// specResourceNames are the resources spec.resources may name.
var specResourceNames = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// validateStored makes the CRD's checks of the object (see above).
func validateStored(nc *clusterv1beta1.NatsCluster) error {
	bad := func(field, format string, args ...any) error {
		return &SpecError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	s := &nc.Spec
	switch {
	case len(nc.Name) > 49:
		return bad("metadata.name", "must be at most 49 characters: the names and labels of each server's objects derive from it")
	case !clusterNameRE.MatchString(nc.Name):
		return bad("metadata.name", "must be a DNS label starting with a letter (lower case letters, digits and '-')")
	case !semverRE.MatchString(s.Version):
		return bad("spec.version", "%q must be a semantic version such as 2.15.2 (no leading v)", s.Version)
	case s.Replicas < 1 || s.Replicas > 99:
		return bad("spec.replicas", "%d must be between 1 and 99", s.Replicas)
	case s.JetStream != nil && s.Replicas < 2 && s.Gateway != nil:
		return bad("spec.replicas", "a single JetStream server runs standalone, without the cluster block a supercluster's shared JetStream needs: use replicas 3 with spec.gateway")
	case s.Image.Digest != "" && !digestRE.MatchString(s.Image.Digest):
		return bad("spec.image.digest", "must be sha256: followed by 64 lowercase hex characters")
	}
	for k := range s.ServerTags {
		if k == "" {
			return bad("spec.serverTags", "server tag keys must not be empty")
		}
	}
	if err := validateSpecResources(s); err != nil {
		return err
	}
	if err := validateStoredJetStream(s.JetStream); err != nil {
		return err
	}
	if err := validateStoredGateway(s.Gateway); err != nil {
		return err
	}
	if err := validateStoredLeafNodes(s.LeafNodes); err != nil {
		return err
	}

	if err := validateStoredTLS(s); err != nil {
		return err
	}
	if err := validateStoredListeners(s); err != nil {
		return err
	}
	if err := validateStoredLameDuck(s.LameDuck); err != nil {
		return err
	}
	if pt := s.PodTemplate; pt != nil {
		for _, c := range pt.Spec.Containers {
			if c.Name != ContainerName && c.Image == "" {
				return bad("spec.podTemplate.spec.containers", "container %s has no image", c.Name)
			}
		}
	}
	// Last: a spec stored before the rule (an earlier release) is held
	// with it, and every other refusal names its own field first.
	if l := s.LeafNodes; l != nil && l.Accept && s.Auth == nil && !l.Insecure {
		return bad("spec.leafnodes.accept", "without spec.auth admits any leaf, unauthenticated, into the global account: set spec.auth (leaves then authenticate as users of its accounts), or spec.leafnodes.insecure: true to run the leaf listener open")
	}
	return nil
}

// validateSpecResources: spec.resources names only cpu, memory and
// ephemeral-storage, none negative, no request above its limit, no claims,
// and not beside resources of the nats container in the podTemplate.
func validateSpecResources(s *clusterv1beta1.NatsClusterSpec) error {
	r := s.Resources
	if len(r.Claims) > 0 {
		return &SpecError{Field: "spec.resources", Message: "resource claims are not supported"}
	}
	for part, list := range map[string]corev1.ResourceList{"limits": r.Limits, "requests": r.Requests} {
		for name, q := range list {
			field := "spec.resources." + part
			if !slices.Contains(specResourceNames, name) {
				return &SpecError{Field: field, Message: part + " may name only cpu, memory and ephemeral-storage"}
			}
			if q.Sign() < 0 {
				return &SpecError{Field: field, Message: fmt.Sprintf("%s.%s must not be negative", part, name)}
			}
		}
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			return &SpecError{Field: "spec.resources.requests", Message: fmt.Sprintf("requests.%s must not be larger than limits.%s", name, name)}
		}
	}
	if len(r.Limits)+len(r.Requests) > 0 && s.PodTemplate != nil {
		for _, c := range s.PodTemplate.Spec.Containers {
			if c.Name == ContainerName && len(c.Resources.Limits)+len(c.Resources.Requests) > 0 {
				return &SpecError{Field: "spec.podTemplate.spec.containers",
					Message: "the nats container's resources are set in spec.resources or in the podTemplate, not both"}
			}
		}
	}
	return nil
}

// validateStoredJetStream: limits not negative, a domain of letters,
// digits, '_' and '-', and a claim template the API server takes for a
// directory store.
func validateStoredJetStream(js *clusterv1beta1.JetStreamSpec) error {
	if js == nil {
		return nil
	}
	if l := js.Limits; l != nil {
		for field, q := range map[string]*resource.Quantity{"maxFileStore": l.MaxFileStore, "maxMemoryStore": l.MaxMemoryStore} {
			if q != nil && q.Sign() < 0 {
				return &SpecError{Field: "spec.jetstream.limits." + field, Message: "must not be negative"}
			}
		}
	}
	if len(js.Domain) > 64 || !domainRE.MatchString(js.Domain) {
		return &SpecError{Field: "spec.jetstream.domain", Message: "must be at most 64 letters, digits, '_' and '-'"}
	}
	vct := js.VolumeClaimTemplate
	if vct == nil {
		return nil
	}
	const f = "spec.jetstream.volumeClaimTemplate"
	spec := vct.Spec
	if _, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		return &SpecError{Field: f + ".spec.resources", Message: "resources.requests.storage is required: it sizes each server's store"}
	}
	for part, list := range map[string]corev1.ResourceList{"requests": spec.Resources.Requests, "limits": spec.Resources.Limits} {
		for name := range list {
			if name != corev1.ResourceStorage {
				return &SpecError{Field: f + ".spec.resources." + part, Message: part + " may name only storage"}
			}
		}
	}
	for _, m := range spec.AccessModes {
		if m == corev1.ReadWriteOncePod && len(spec.AccessModes) > 1 {
			return &SpecError{Field: f + ".spec.accessModes", Message: "ReadWriteOncePod cannot be combined with another access mode"}
		}
	}
	if spec.VolumeMode != nil && *spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		return &SpecError{Field: f + ".spec.volumeMode", Message: "must be Filesystem: the store is a mounted directory"}
	}
	if sc := spec.StorageClassName; sc != nil && *sc != "" {
		if errs := validation.IsDNS1123Subdomain(*sc); len(errs) > 0 {
			return &SpecError{Field: f + ".spec.storageClassName", Message: strings.Join(errs, "; ")}
		}
	}
	for k, v := range vct.Metadata.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return &SpecError{Field: f + ".metadata.labels", Message: fmt.Sprintf("key %q: %s", k, strings.Join(errs, "; "))}
		}
		if errs := validation.IsValidLabelValue(string(v)); len(errs) > 0 {
			return &SpecError{Field: f + ".metadata.labels." + k, Message: strings.Join(errs, "; ")}
		}
	}
	return nil
}

// validateStoredTLS: client TLS from a Secret or a Certificate (one of
// them), valid Secret and key names, an issuer of kind Issuer or
// ClusterIssuer; route TLS whose mode and Secret agree.
func validateStoredTLS(s *clusterv1beta1.NatsClusterSpec) error {
	ref := func(field string, r *clusterv1beta1.TLSSecretRef) error {
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			return &SpecError{Field: field + ".name", Message: strings.Join(errs, "; ")}
		}
		for k, v := range map[string]string{"certKey": r.CertKey, "keyKey": r.KeyKey, "caKey": r.CAKey} {
			if v != "" && (len(v) > 253 || !keyNameRE.MatchString(v)) {
				return &SpecError{Field: field + "." + k, Message: "a Secret key is letters, digits, '-', '_' and '.'"}
			}
		}
		return nil
	}
	if t := s.TLS; t != nil {
		if (t.Secret == nil) == (t.Certificate == nil) {
			return &SpecError{Field: "spec.tls", Message: "exactly one of secret and certificate must be set"}
		}
		if t.Secret != nil {
			if err := ref("spec.tls.secret", t.Secret); err != nil {
				return err
			}
		}
		if c := t.Certificate; c != nil && c.IssuerRef.Kind != "" && c.IssuerRef.Kind != "Issuer" && c.IssuerRef.Kind != "ClusterIssuer" {
			return &SpecError{Field: "spec.tls.certificate.issuerRef.kind", Message: "must be Issuer or ClusterIssuer"}
		}
	}
	if t := s.Routes.TLS; t != nil {
		switch t.Mode {
		case "", clusterv1beta1.RouteTLSGenerated, clusterv1beta1.RouteTLSSecret, clusterv1beta1.RouteTLSDisabled:
		default:
			return &SpecError{Field: "spec.routes.tls.mode", Message: "must be Generated, Secret or Disabled"}
		}
		switch {
		case t.Mode == clusterv1beta1.RouteTLSSecret && t.Secret == nil:
			return &SpecError{Field: "spec.routes.tls.secret", Message: "mode Secret needs secret"}
		case t.Mode != clusterv1beta1.RouteTLSSecret && t.Secret != nil:
			return &SpecError{Field: "spec.routes.tls.secret", Message: "secret is for mode Secret only"}
		case t.Secret != nil:
			return ref("spec.routes.tls.secret", t.Secret)
		}
	}
	return nil
}

// validateStoredLameDuck: a duration of at least 30s, a grace period of at
// least 1s and shorter than the duration (nats-server's own bounds).
func validateStoredLameDuck(ld *clusterv1beta1.LameDuckSpec) error {
	if ld == nil {
		return nil
	}
	d, g := clusterv1beta1.DefaultLameDuckDuration, clusterv1beta1.DefaultLameDuckGracePeriod
	if ld.Duration != nil {
		d = ld.Duration.Duration
		if d < 30*time.Second {
			return &SpecError{Field: "spec.lameDuck.duration", Message: "must be at least 30s: nats-server refuses a shorter lame_duck_duration"}
		}
	}
	if ld.GracePeriod != nil {
		g = ld.GracePeriod.Duration
		if g < time.Second {
			return &SpecError{Field: "spec.lameDuck.gracePeriod", Message: "must be at least 1s: nats-server takes 0 for its default of 10s"}
		}
	}
	if g >= d {
		return &SpecError{Field: "spec.lameDuck.gracePeriod", Message: fmt.Sprintf("%s must be shorter than the duration %s: nats-server refuses it",
			metav1.Duration{Duration: g}.Duration, metav1.Duration{Duration: d}.Duration)}
	}
	return nil
}
