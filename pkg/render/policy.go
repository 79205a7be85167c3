package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// The pod template policies (--pod-template-policy).
const (
	// PodTemplatePolicyRestricted lets a NatsCluster's author shape the
	// servers' pods but not give them rights the rendered pod does not
	// have: no other ServiceAccount, images only from an allow-list, no
	// volume or environment variable that reads a Secret, a claim, a token,
	// a CSI driver or the node, and no sidecar mounting the controller's
	// volumes.
	PodTemplatePolicyRestricted = "restricted"
	// PodTemplatePolicyAny applies every podTemplate the CRD accepts: the
	// right to create or patch a NatsCluster then equals pods/create in its
	// namespace (any ServiceAccount, image, Secret or claim of it).
	PodTemplatePolicyAny = "any"
)

// DefaultAllowedImages are the image repositories the restricted policy
// allows unless --pod-template-allowed-images names others: the nats
// image's and the exporter's (the images the controller renders by
// default).
func DefaultAllowedImages() []string {
	return []string{"nats", imageRepository(clusterv1beta1.DefaultExporterImage)}
}

// PodTemplatePolicy is what the controller lets a NatsCluster ask of its
// servers' pods beyond what it renders (--pod-template-policy and
// --pod-template-allowed-images). The zero value is PodTemplatePolicyAny.
// Render refuses a cluster the policy does not allow with a *SpecError
// naming the field and the policy, before it renders any object, so the
// controller holds it InvalidSpec and writes nothing.
type PodTemplatePolicy struct {
	// Name is PodTemplatePolicyRestricted or PodTemplatePolicyAny; ""
	// means any.
	Name string
	// AllowedImages are what the restricted policy allows as an image of a
	// sidecar (spec.podTemplate.spec.containers), of the server
	// (spec.image.repository) and of the exporter (spec.metrics.image):
	// each entry an image repository ("nats", any tag or digest of it) or,
	// ending in "/", a registry or path prefix ("registry.example.com/nats/").
	// Docker Hub's names match in their short and long forms (nats,
	// docker.io/library/nats). Nil means DefaultAllowedImages.
	AllowedImages []string
}

// ParsePodTemplatePolicy reads the flags: the policy's name and its
// comma-separated allowed images.
func ParsePodTemplatePolicy(name, allowedImages string) (PodTemplatePolicy, error) {
	if name != PodTemplatePolicyRestricted && name != PodTemplatePolicyAny {
		return PodTemplatePolicy{}, fmt.Errorf("--pod-template-policy=%q: must be %s or %s", name, PodTemplatePolicyRestricted, PodTemplatePolicyAny)
	}
	var images []string
	for _, s := range strings.Split(allowedImages, ",") {
		if s = strings.TrimSpace(s); s != "" {
			images = append(images, s)
		}
	}
	if len(images) == 0 {
		return PodTemplatePolicy{}, fmt.Errorf("--pod-template-allowed-images is empty: name at least the image repositories the servers run (default %s)", strings.Join(DefaultAllowedImages(), ","))
	}
	return PodTemplatePolicy{Name: name, AllowedImages: images}, nil
}

// String is the policy's name.
func (p PodTemplatePolicy) String() string {
	if p.Name == "" {
		return PodTemplatePolicyAny
	}
	return p.Name
}

func (p PodTemplatePolicy) allowedImages() []string {
	if p.AllowedImages == nil {
		return DefaultAllowedImages()
	}
	return p.AllowedImages
}

// refuse is the SpecError of something the policy does not allow.
func (p PodTemplatePolicy) refuse(field, what, why string) error {
	return &SpecError{Field: field, Message: fmt.Sprintf("%s is not allowed by the controller's pod template policy %q (--pod-template-policy): %s",
		what, p.String(), why)}
}

// check checks the cluster's images and podTemplate against
// the policy; rendered is the server's pod spec before the podTemplate is
// merged: a podTemplate volume equal to one of its volumes is the
// controller's own.
func (p PodTemplatePolicy) check(spec *clusterv1beta1.NatsClusterSpec, rendered *corev1.PodSpec) error {
	if p.Name != PodTemplatePolicyRestricted {
		return nil
	}
	allowed := p.allowedImages()
	imageWhy := "the images allowed are " + strings.Join(allowed, ", ") + " (--pod-template-allowed-images)"
	if repo := spec.Image.Repository; repo != "" && !imageAllowed(allowed, repo) {
		return p.refuse("spec.image.repository", fmt.Sprintf("image repository %q", repo), imageWhy)
	}
	if spec.Metrics.IsEnabled() && spec.Metrics.Image != "" && !imageAllowed(allowed, spec.Metrics.Image) {
		return p.refuse("spec.metrics.image", fmt.Sprintf("image %q", spec.Metrics.Image), imageWhy)
	}
	pt := spec.PodTemplate
	if pt == nil {
		return nil
	}
	if sa := pt.Spec.ServiceAccountName; sa != "" && sa != rendered.ServiceAccountName {
		return p.refuse("spec.podTemplate.spec.serviceAccountName", fmt.Sprintf("ServiceAccount %q", sa),
			"the servers run as the namespace's default ServiceAccount, without its token")
	}
	for _, c := range pt.Spec.Containers {
		field := "spec.podTemplate.spec.containers[name=" + c.Name + "]"
		if c.Image != "" && !imageAllowed(allowed, c.Image) {
			return p.refuse(field+".image", fmt.Sprintf("image %q", c.Image), imageWhy)
		}
		if err := p.checkMounts(c, field, rendered); err != nil {
			return err
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return p.refuse(field+".env[name="+e.Name+"].valueFrom.secretKeyRef", fmt.Sprintf("a key of Secret %q", e.ValueFrom.SecretKeyRef.Name),
					"the pods read only the Secrets the NatsCluster's own fields name")
			}
		}
		for i, e := range c.EnvFrom {
			if e.SecretRef != nil {
				return p.refuse(fmt.Sprintf("%s.envFrom[%d].secretRef", field, i), fmt.Sprintf("Secret %q", e.SecretRef.Name),
					"the pods read only the Secrets the NatsCluster's own fields name")
			}
		}
	}
	for _, v := range pt.Spec.Volumes {
		if slices.ContainsFunc(rendered.Volumes, func(r corev1.Volume) bool { return apiequality.Semantic.DeepEqual(r, v) }) {
			continue
		}
		if err := p.checkVolume(v); err != nil {
			return err
		}
	}
	return nil
}

// checkMounts refuses a mount (or a block device) of one of the
// controller's volumes in a podTemplate container other than the server's:
// the config volume (which projects the TLS keys, the leaf credentials and
// the CAs the controller copies), the JetStream data (a claim or an
// emptyDir), the pid and the exporter's CA volume, whatever the renderer
// made. A sidecar runs what the podTemplate gives it; the server's
// container runs the controller's command, and the exporter may keep the
// mounts it is rendered with. A podTemplate has no init containers (the
// CRD prunes them), so its containers are all there is to check.
func (p PodTemplatePolicy) checkMounts(c corev1.Container, field string, rendered *corev1.PodSpec) error {
	if c.Name == ContainerName {
		return nil
	}
	own := map[string]bool{DataVolumeName: true}
	for _, v := range rendered.Volumes {
		own[v.Name] = true
	}
	var keep []corev1.VolumeMount
	if i := slices.IndexFunc(rendered.Containers, func(r corev1.Container) bool { return r.Name == c.Name }); i >= 0 {
		keep = rendered.Containers[i].VolumeMounts
	}
	why := "the controller's volumes (" + strings.Join(slices.Sorted(maps.Keys(own)), ", ") +
		": the config volume holds the TLS keys and credentials it projects) are mounted by the server's container only"
	for i, m := range c.VolumeMounts {
		if own[m.Name] && !slices.ContainsFunc(keep, func(k corev1.VolumeMount) bool { return apiequality.Semantic.DeepEqual(k, m) }) {
			return p.refuse(fmt.Sprintf("%s.volumeMounts[%d]", field, i), fmt.Sprintf("a mount of the controller's volume %q", m.Name), why)
		}
	}
	for i, d := range c.VolumeDevices {
		if own[d.Name] {
			return p.refuse(fmt.Sprintf("%s.volumeDevices[%d]", field, i), fmt.Sprintf("the controller's volume %q as a device", d.Name), why)
		}
	}
	return nil
}

// volumeWhy says which volumes the restricted policy allows.
const volumeWhy = "only configMap, emptyDir, downwardAPI and projected configMap and downwardAPI volumes may be added"

// checkVolume allows configMap, emptyDir, downwardAPI and projected
// configMap and downwardAPI sources, and refuses every other source (a
// Secret, a claim, an ephemeral claim, CSI, hostPath, a service account
// token, a cluster trust bundle, an image, a network volume).
func (p PodTemplatePolicy) checkVolume(v corev1.Volume) error {
	field := "spec.podTemplate.spec.volumes[name=" + v.Name + "]"
	src := v.VolumeSource
	switch {
	case src.ConfigMap != nil, src.EmptyDir != nil, src.DownwardAPI != nil:
		return nil
	case src.Projected != nil:
		for i, s := range src.Projected.Sources {
			if s.ConfigMap == nil && s.DownwardAPI == nil {
				kind := sourceKind(s)
				return p.refuse(fmt.Sprintf("%s.projected.sources[%d].%s", field, i, kind), fmt.Sprintf("the %s source of projected volume %q", kind, v.Name), volumeWhy)
			}
		}
		return nil
	}
	kind := sourceKind(src)
	return p.refuse(field+"."+kind, fmt.Sprintf("volume %q (%s)", v.Name, kind), volumeWhy)
}

// sourceKind names the field a volume source or projection sets, as the
// API names it (secret, persistentVolumeClaim, serviceAccountToken, ...);
// "source" when it sets none.
func sourceKind(src any) string {
	b, err := json.Marshal(src)
	var m map[string]json.RawMessage
	if err != nil || json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return "source"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[0]
}

// imageAllowed reports whether image is one of allowed's repositories (any
// tag or digest) or under one of its prefixes ending in "/".
func imageAllowed(allowed []string, image string) bool {
	image = normalizeImage(image)
	for _, a := range allowed {
		if strings.HasSuffix(a, "/") {
			if strings.HasPrefix(image, normalizeImage(a)) {
				return true
			}
			continue
		}
		a = normalizeImage(a)
		if image == a || strings.HasPrefix(image, a+":") || strings.HasPrefix(image, a+"@") {
			return true
		}
	}
	return false
}

// normalizeImage writes a Docker Hub image in its short form:
// docker.io/library/nats, index.docker.io/library/nats and library/nats are
// nats.
func normalizeImage(image string) string {
	for _, prefix := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		if strings.HasPrefix(image, prefix) {
			image = strings.TrimPrefix(image[len(prefix):], "library/")
			break
		}
	}
	return strings.TrimPrefix(image, "library/")
}

// imageRepository is an image reference without its tag and digest.
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}
