package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// NatsResources are the nats container's resources: spec.resources, or the
// podTemplate's nats container's (the CRD allows only one of the two). They
// set GOMEMLIMIT and JetStream's default max_memory_store.
func NatsResources(spec *clusterv1beta1.NatsClusterSpec) corev1.ResourceRequirements {
	if pt := spec.PodTemplate; pt != nil {
		for _, c := range pt.Spec.Containers {
			if c.Name == ContainerName && (len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0) {
				return *c.Resources.DeepCopy()
			}
		}
	}
	return *spec.Resources.DeepCopy()
}

// restrictedContainerContext is the security context of every container the
// controller renders, and of a podTemplate sidecar that sets none: the
// restricted Pod Security Standard.
func restrictedContainerContext() *corev1.SecurityContext {
	f, t := false, true
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &f,
		ReadOnlyRootFilesystem:   &t,
		RunAsNonRoot:             &t,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// hasDefaultSpreading reports whether the pods keep the default spreading:
// no affinity and no topology spread of the podTemplate's.
func hasDefaultSpreading(spec *clusterv1beta1.NatsClusterSpec) bool {
	pt := spec.PodTemplate
	return pt == nil || (pt.Spec.Affinity == nil && len(pt.Spec.TopologySpreadConstraints) == 0)
}

// applyPodTemplate merges spec.podTemplate over a rendered pod template:
// labels and annotations added (the rendered ones win), the spec
// strategic-merged as kubectl patch --type strategic merges a pod spec. The
// merged pod must still run the server as rendered (its image, command,
// ports, mounts, lifecycle and probe checks) and pass the restricted Pod
// Security Standard; a *SpecError names what does not. The CRD refuses most
// such templates at apply; this is the check of the merged result.
func applyPodTemplate(spec *clusterv1beta1.NatsClusterSpec, tmpl *corev1.PodTemplateSpec) error {
	pt := spec.PodTemplate
	if pt == nil {
		return nil
	}
	if len(pt.Metadata.Labels) > 0 {
		labels := map[string]string{}
		for k, v := range pt.Metadata.Labels {
			labels[k] = string(v)
		}
		maps.Copy(labels, tmpl.Labels)
		tmpl.Labels = labels
	}
	if len(pt.Metadata.Annotations) > 0 {
		annotations := maps.Clone(pt.Metadata.Annotations)
		maps.Copy(annotations, tmpl.Annotations)
		tmpl.Annotations = annotations
	}

	override := pt.Spec.DeepCopy()
	if !hasDefaultSpreading(spec) {
		tmpl.Spec.Affinity = nil
	}
	for i := range override.Containers {
		c := &override.Containers[i]
		if c.Name == ContainerName || c.Name == ExporterContainerName {
			continue
		}
		defaultContainer(c)
	}
	original, err := json.Marshal(tmpl.Spec)
	if err != nil {
		return fmt.Errorf("encoding the rendered pod spec: %w", err)
	}
	patch, err := json.Marshal(podSpecPatch(override))
	if err != nil {
		return &SpecError{Field: "spec.podTemplate.spec", Message: err.Error()}
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, corev1.PodSpec{})
	if err != nil {
		return &SpecError{Field: "spec.podTemplate.spec", Message: "cannot be merged over the rendered pod spec: " + err.Error()}
	}
	var out corev1.PodSpec
	if err := json.Unmarshal(merged, &out); err != nil {
		return &SpecError{Field: "spec.podTemplate.spec", Message: "the merged pod spec cannot be read: " + err.Error()}
	}
	if err := keepsTheServer(&tmpl.Spec, &out); err != nil {
		return err
	}
	if err := restricted(tmpl, &out); err != nil {
		return err
	}
	tmpl.Spec = out
	return nil
}

// podSpecPatch is the podTemplate's spec as a pod spec, for the merge.
func podSpecPatch(o *clusterv1beta1.PodSpecOverride) map[string]any {
	p := map[string]any{}
	set := func(k string, v any, present bool) {
		if present {
			p[k] = v
		}
	}
	set("containers", o.Containers, len(o.Containers) > 0)
	set("volumes", o.Volumes, len(o.Volumes) > 0)
	set("nodeSelector", o.NodeSelector, len(o.NodeSelector) > 0)
	set("tolerations", o.Tolerations, len(o.Tolerations) > 0)
	set("affinity", o.Affinity, o.Affinity != nil)
	set("topologySpreadConstraints", o.TopologySpreadConstraints, len(o.TopologySpreadConstraints) > 0)
	set("priorityClassName", o.PriorityClassName, o.PriorityClassName != "")
	set("serviceAccountName", o.ServiceAccountName, o.ServiceAccountName != "")
	set("imagePullSecrets", o.ImagePullSecrets, len(o.ImagePullSecrets) > 0)
	set("securityContext", o.SecurityContext, o.SecurityContext != nil)
	return p
}

// defaultContainer fills what the API server would default in a sidecar
// (so the StatefulSet read back compares equal) and, when it sets none, the
// security context the restricted Pod Security Standard asks of it.
func defaultContainer(c *corev1.Container) {
	if c.SecurityContext == nil {
		// What the restricted standard asks of a container; the pod's
		// context runs it as non-root with the runtime's seccomp profile.
		f := false
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: &f,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if tag := c.Image[strings.LastIndex(c.Image, "/")+1:]; !strings.Contains(tag, "@") && (!strings.Contains(tag, ":") || strings.HasSuffix(tag, ":latest")) {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
}

// keepsTheServer checks that the merged pod spec still runs the server as
// rendered: the nats container's image, command, ports, lifecycle, probe
// checks and the controller's volumes and mounts.
func keepsTheServer(rendered, merged *corev1.PodSpec) error {
	field := func(f string) string {
		return "spec.podTemplate.spec.containers[name=nats]." + f
	}
	want := rendered.Containers[0]
	idx := slices.IndexFunc(merged.Containers, func(c corev1.Container) bool { return c.Name == ContainerName })
	if idx < 0 {
		return &SpecError{Field: "spec.podTemplate.spec.containers", Message: "the nats container cannot be removed"}
	}
	got := merged.Containers[idx]
	switch {
	case got.Image != want.Image || !slices.Equal(got.Command, want.Command) || len(got.Args) > 0:
		return &SpecError{Field: field("image"), Message: "the nats container's image, command and args are the controller's: set spec.version and spec.image instead"}
	case !apiequality.Semantic.DeepEqual(got.Ports, want.Ports):
		return &SpecError{Field: field("ports"), Message: "the nats container's ports (client 4222, cluster 6222, monitor 8222) are the controller's and cannot be changed"}
	case !apiequality.Semantic.DeepEqual(got.Lifecycle, want.Lifecycle):
		return &SpecError{Field: field("lifecycle"), Message: "the nats container's lifecycle (lame duck mode before it stops) is the controller's"}
	case !sameCheck(got.StartupProbe, want.StartupProbe) || !sameCheck(got.ReadinessProbe, want.ReadinessProbe) || !sameCheck(got.LivenessProbe, want.LivenessProbe):
		return &SpecError{Field: field("readinessProbe"), Message: "the nats container's probes check what the controller relies on: only their timings may be set"}
	}
	for _, m := range want.VolumeMounts {
		if !slices.ContainsFunc(got.VolumeMounts, func(g corev1.VolumeMount) bool { return apiequality.Semantic.DeepEqual(g, m) }) {
			return &SpecError{Field: field("volumeMounts"), Message: fmt.Sprintf("the mount of volume %s at %s is the controller's", m.Name, m.MountPath)}
		}
	}
	// A mount of the user's under one of the controller's would shadow what
	// the controller puts there (the config, the TLS files, the store).
	for _, g := range got.VolumeMounts {
		if slices.ContainsFunc(want.VolumeMounts, func(m corev1.VolumeMount) bool { return apiequality.Semantic.DeepEqual(g, m) }) {
			continue
		}
		for _, m := range want.VolumeMounts {
			if under(g.MountPath, m.MountPath) {
				return &SpecError{Field: field("volumeMounts"), Message: fmt.Sprintf(
					"the mount of volume %s at %s is inside the controller's mount of volume %s at %s: mount it elsewhere", g.Name, g.MountPath, m.Name, m.MountPath)}
			}
		}
	}
	for _, v := range rendered.Volumes {
		if !slices.ContainsFunc(merged.Volumes, func(g corev1.Volume) bool { return apiequality.Semantic.DeepEqual(g, v) }) {
			return &SpecError{Field: "spec.podTemplate.spec.volumes", Message: fmt.Sprintf("volume %s is the controller's", v.Name)}
		}
	}
	return nil
}

// under says whether path is dir or inside it, as mount paths go.
func under(path, dir string) bool {
	path, dir = strings.TrimRight(path, "/"), strings.TrimRight(dir, "/")
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// sameCheck reports whether two probes check the same thing, whatever their
// timings.
func sameCheck(a, b *corev1.Probe) bool {
	if a == nil || b == nil {
		return a == b
	}
	return apiequality.Semantic.DeepEqual(a.ProbeHandler, b.ProbeHandler)
}

// psaEvaluator checks pods against the Pod Security Standards, as the API
// server's PodSecurity admission does.
var psaEvaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err)
	}
	return e
}()

// restricted checks a merged pod spec against the restricted Pod Security
// Standard (latest), as a namespace that enforces it would at admission.
func restricted(tmpl *corev1.PodTemplateSpec, spec *corev1.PodSpec) error {
	res := policy.AggregateCheckResults(psaEvaluator.EvaluatePod(
		psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &tmpl.ObjectMeta, spec))
	if res.Allowed {
		return nil
	}
	return &SpecError{
		Field:   "spec.podTemplate.spec",
		Message: "the merged pod would violate the restricted Pod Security Standard: " + res.ForbiddenDetail(),
	}
}

// TemplateChanges names the parts of a pod template that differ between a
// server's running StatefulSet and its target, in a fixed order, for the
// restart reason: "labels or annotations", "scheduling", "the nats
// container", "the metrics container", "sidecars", "volumes", "the pod's
// security context". Revision annotations are not compared; nil when
// nothing else differs.
func TemplateChanges(running, target *corev1.PodTemplateSpec) []string {
	var out []string
	add := func(part string, differ bool) {
		if differ {
			out = append(out, part)
		}
	}
	meta := func(t *corev1.PodTemplateSpec) (map[string]string, map[string]string) {
		a := maps.Clone(t.Annotations)
		delete(a, clusterv1beta1.AnnotationConfigRevision)
		delete(a, clusterv1beta1.AnnotationTemplateRevision)
		return t.Labels, a
	}
	rl, ra := meta(running)
	tl, ta := meta(target)
	add("labels or annotations", !apiequality.Semantic.DeepEqual(rl, tl) || !apiequality.Semantic.DeepEqual(ra, ta))
	r, t := &running.Spec, &target.Spec
	add("scheduling", !apiequality.Semantic.DeepEqual(r.NodeSelector, t.NodeSelector) || !apiequality.Semantic.DeepEqual(r.Tolerations, t.Tolerations) ||
		!apiequality.Semantic.DeepEqual(r.Affinity, t.Affinity) || !apiequality.Semantic.DeepEqual(r.TopologySpreadConstraints, t.TopologySpreadConstraints) ||
		r.PriorityClassName != t.PriorityClassName)
	container := func(s *corev1.PodSpec, name string) *corev1.Container {
		if i := slices.IndexFunc(s.Containers, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
			return &s.Containers[i]
		}
		return nil
	}
	add("the nats container", !apiequality.Semantic.DeepEqual(container(r, ContainerName), container(t, ContainerName)))
	add("the metrics container", !apiequality.Semantic.DeepEqual(container(r, ExporterContainerName), container(t, ExporterContainerName)))
	sidecars := func(s *corev1.PodSpec) []corev1.Container {
		return slices.DeleteFunc(slices.Clone(s.Containers), func(c corev1.Container) bool {
			return c.Name == ContainerName || c.Name == ExporterContainerName
		})
	}
	add("sidecars", !apiequality.Semantic.DeepEqual(sidecars(r), sidecars(t)))
	add("volumes", !apiequality.Semantic.DeepEqual(r.Volumes, t.Volumes))
	add("the pod's security context", !apiequality.Semantic.DeepEqual(r.SecurityContext, t.SecurityContext) ||
		r.ServiceAccountName != t.ServiceAccountName || !apiequality.Semantic.DeepEqual(r.ImagePullSecrets, t.ImagePullSecrets))
	return out
}
