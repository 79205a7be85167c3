package render_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// podTemplateCluster is a cluster with the podTemplate of the e2e test: a
// toleration, a node selector, the nats container's resources and an extra
// env var, and a sidecar.
func podTemplateCluster() *clusterv1beta1.NatsCluster {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	nc.Spec.PodTemplate = &clusterv1beta1.PodTemplate{
		Metadata: clusterv1beta1.EmbeddedObjectMetadata{
			Labels:      map[string]clusterv1beta1.LabelValue{"team": "messaging", "cluster.nats-operator.io/cluster": "other"},
			Annotations: map[string]string{"example.com/owner": "ops"},
		},
		Spec: clusterv1beta1.PodSpecOverride{
			NodeSelector: map[string]string{"kubernetes.io/hostname": "localnode"},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "nats", Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{
				{Name: "nats", Env: []corev1.EnvVar{{Name: "TEAM", Value: "messaging"}},
					Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 3}},
				{Name: "sidecar", Image: "busybox:1.37", Command: []string{"sleep", "infinity"}},
			},
		},
	}
	return nc
}

func container(t *testing.T, pod *corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %s in %+v", name, pod.Containers)
	}
	return pod.Containers[i]
}

func TestAPodTemplateIsMergedOverEveryServer(t *testing.T) {
	out, err := render.Render(render.Input{Cluster: podTemplateCluster()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		tmpl := s.StatefulSet.Spec.Template
		pod := &tmpl.Spec
		if tmpl.Labels["team"] != "messaging" || tmpl.Labels["cluster.nats-operator.io/cluster"] != "demo" {
			t.Errorf("%s labels %v, want team added and the controller's cluster label kept", s.Name, tmpl.Labels)
		}
		if tmpl.Annotations["example.com/owner"] != "ops" || tmpl.Annotations[clusterv1beta1.AnnotationConfigRevision] != s.Revision {
			t.Errorf("%s annotations %v", s.Name, tmpl.Annotations)
		}
		if pod.NodeSelector["kubernetes.io/hostname"] != "localnode" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" {
			t.Errorf("%s nodeSelector %v tolerations %v", s.Name, pod.NodeSelector, pod.Tolerations)
		}
		if pod.Affinity == nil || len(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 2 {
			t.Errorf("%s affinity %+v, want the default spreading kept", s.Name, pod.Affinity)
		}
		nats := container(t, pod, "nats")
		if q := nats.Resources.Limits[corev1.ResourceMemory]; q.String() != "512Mi" {
			t.Errorf("%s nats memory limit %s, want 512Mi", s.Name, q.String())
		}
		env := map[string]string{}
		for _, e := range nats.Env {
			env[e.Name] = e.Value
		}
		if env["TEAM"] != "messaging" || env["GOMEMLIMIT"] != "483183820" {
			t.Errorf("%s nats env %v, want TEAM and GOMEMLIMIT 90%% of 512Mi", s.Name, env)
		}
		if nats.ReadinessProbe.PeriodSeconds != 3 || nats.ReadinessProbe.HTTPGet == nil || nats.ReadinessProbe.TimeoutSeconds == 0 {
			t.Errorf("%s readiness probe %+v, want the period merged over the rendered check", s.Name, nats.ReadinessProbe)
		}
		if len(nats.Ports) != 3 || len(nats.VolumeMounts) != 3 || nats.Lifecycle == nil {
			t.Errorf("%s nats container lost what the server needs: %+v", s.Name, nats)
		}
		side := container(t, pod, "sidecar")
		if sc := side.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s sidecar security context %+v, want the restricted one filled in", s.Name, side.SecurityContext)
		}
		container(t, pod, "metrics")
	}
	if !strings.Contains(string(out.Servers[0].Config), `"max_memory_store": 402653184`) {
		t.Errorf("max_memory_store is not 75%% of the podTemplate's 512Mi: %s", out.Servers[0].Config)
	}
}

// The user's affinity or topology spread replaces the default spreading.
func TestTheUsersAffinityReplacesTheDefaultSpreading(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	nc.Spec.PodTemplate = &clusterv1beta1.PodTemplate{Spec: clusterv1beta1.PodSpecOverride{
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: render.ClusterSelector("demo")}}},
	}}
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	pod := out.Servers[0].StatefulSet.Spec.Template.Spec
	if pod.Affinity != nil || len(pod.TopologySpreadConstraints) != 1 {
		t.Errorf("affinity %+v spread %+v, want only the user's spread", pod.Affinity, pod.TopologySpreadConstraints)
	}
}

// What the CRD's rules cannot see is checked on the merged pod: it is held
// (a *SpecError naming the path, InvalidSpec), nothing rendered.
func TestPodTemplatesTheMergeCannotKeepAreHeldNamingThePath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  clusterv1beta1.PodSpecOverride
		field string
		says  string
	}{
		{"a hostPath volume", clusterv1beta1.PodSpecOverride{
			Volumes:    []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}},
			Containers: []corev1.Container{{Name: "logs", Image: "busybox:1.37", VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}}},
		}, "spec.podTemplate.spec", "restricted volume types"},
		{"a sidecar adding NET_ADMIN", clusterv1beta1.PodSpecOverride{Containers: []corev1.Container{{Name: "net", Image: "busybox:1.37",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}},
			"spec.podTemplate.spec", "NET_ADMIN"},
		{"a mount over the config directory", clusterv1beta1.PodSpecOverride{
			Volumes:    []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "nats", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: render.ConfigDir}}}},
		}, "spec.podTemplate.spec.containers[name=nats].volumeMounts", "is the controller's"},
		{"a mount nested inside the config directory", clusterv1beta1.PodSpecOverride{
			Volumes:    []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "nats", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: render.ConfigDir + "/extra"}}}},
		}, "spec.podTemplate.spec.containers[name=nats].volumeMounts", "is inside the controller's mount of volume config at " + render.ConfigDir},
		{"a sidecar with a seccomp profile Unconfined", clusterv1beta1.PodSpecOverride{Containers: []corev1.Container{{Name: "s", Image: "busybox:1.37",
			SecurityContext: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}}}},
			"spec.podTemplate.spec", "seccompProfile"},
		{"a negative memory request", clusterv1beta1.PodSpecOverride{Containers: []corev1.Container{{Name: "nats",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")}}}}},
			"spec.podTemplate.spec.containers[name=nats].resources.requests.memory", "must not be negative"},
		{"a sidecar requesting more than its limit", clusterv1beta1.PodSpecOverride{Containers: []corev1.Container{{Name: "s", Image: "busybox:1.37",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			"spec.podTemplate.spec.containers[name=s].resources.requests.cpu", "less than or equal to the limit 1"},
		{"a resource containers cannot have", clusterv1beta1.PodSpecOverride{Containers: []corev1.Container{{Name: "nats",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}}},
			"spec.podTemplate.spec.containers[name=nats].resources.limits.pods", "not a resource of containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := rt.NewCluster("ns", "demo")
			nc.Spec.PodTemplate = &clusterv1beta1.PodTemplate{Spec: tc.spec}
			out, err := render.Render(render.Input{Cluster: nc})
			var se *render.SpecError
			if !errors.As(err, &se) || out != nil {
				t.Fatalf("Render gave %v (output %v), want a SpecError", err, out != nil)
			}
			if se.Field != tc.field || !strings.Contains(se.Message, tc.says) {
				t.Errorf("SpecError %s: %s, want field %s saying %q", se.Field, se.Message, tc.field, tc.says)
			}
			t.Logf("held: %v", err)
		})
	}
}

func TestTemplateChangesNameWhatDiffers(t *testing.T) {
	base, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo")})
	if err != nil {
		t.Fatal(err)
	}
	labelled := rt.NewCluster("ns", "demo")
	labelled.Spec.PodTemplate = &clusterv1beta1.PodTemplate{Metadata: clusterv1beta1.EmbeddedObjectMetadata{Labels: map[string]clusterv1beta1.LabelValue{"team": "a"}}}
	full, err := render.Render(render.Input{Cluster: podTemplateCluster()})
	if err != nil {
		t.Fatal(err)
	}
	lab, err := render.Render(render.Input{Cluster: labelled})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := func(o *render.Output) *corev1.PodTemplateSpec { return &o.Servers[0].StatefulSet.Spec.Template }
	if got := render.TemplateChanges(tmpl(base), tmpl(lab)); !slices.Equal(got, []string{"labels or annotations"}) {
		t.Errorf("labels only: %v", got)
	}
	want := []string{"labels or annotations", "scheduling", "the nats container", "sidecars"}
	if got := render.TemplateChanges(tmpl(base), tmpl(full)); !slices.Equal(got, want) {
		t.Errorf("the full podTemplate: %v, want %v", got, want)
	}
	if got := render.TemplateChanges(tmpl(base), tmpl(base)); got != nil {
		t.Errorf("the same template: %v", got)
	}
}
