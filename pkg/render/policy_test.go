package render_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

var restricted = render.PodTemplatePolicy{Name: render.PodTemplatePolicyRestricted}

// policyCluster is a three-server JetStream cluster with an empty podTemplate.
func policyCluster(edit func(*clusterv1beta1.NatsCluster)) *clusterv1beta1.NatsCluster {
	nc := rt.NewCluster("team-a", "demo", rt.JetStream())
	nc.Spec.PodTemplate = &clusterv1beta1.PodTemplate{}
	edit(nc)
	return nc
}

func addVolume(v corev1.Volume) func(*clusterv1beta1.NatsCluster) {
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.PodTemplate.Spec.Volumes = append(nc.Spec.PodTemplate.Spec.Volumes, v)
	}
}

func addContainer(c corev1.Container) func(*clusterv1beta1.NatsCluster) {
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.PodTemplate.Spec.Containers = append(nc.Spec.PodTemplate.Spec.Containers, c)
	}
}

// refusedByRestricted are specs the restricted policy refuses, each with the
// field the refusal names.
var refusedByRestricted = []struct {
	name, field string
	edit        func(*clusterv1beta1.NatsCluster)
}{
	{"another ServiceAccount", "spec.podTemplate.spec.serviceAccountName", func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.PodTemplate.Spec.ServiceAccountName = "builder"
	}},
	{"a sidecar image not allowed", "spec.podTemplate.spec.containers[name=shell].image",
		addContainer(corev1.Container{Name: "shell", Image: "busybox:1.37", Command: []string{"sleep", "infinity"}})},
	{"a sidecar image named like an allowed one", "spec.podTemplate.spec.containers[name=shell].image",
		addContainer(corev1.Container{Name: "shell", Image: "natsfoo/nats:1", Command: []string{"sleep", "infinity"}})},
	{"a server image not allowed", "spec.image.repository", func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.Image.Repository = "example.com/nats"
	}},
	{"an exporter image not allowed", "spec.metrics.image", func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.Metrics.Image = "example.com/exporter:1"
	}},
	{"a Secret volume", "spec.podTemplate.spec.volumes[name=creds].secret",
		addVolume(corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}})},
	{"a claim", "spec.podTemplate.spec.volumes[name=other].persistentVolumeClaim",
		addVolume(corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-other-0"}}})},
	{"a CSI volume", "spec.podTemplate.spec.volumes[name=vault].csi",
		addVolume(corev1.Volume{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}})},
	{"a hostPath volume", "spec.podTemplate.spec.volumes[name=host].hostPath",
		addVolume(corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run"}}})},
	{"an ephemeral claim", "spec.podTemplate.spec.volumes[name=scratch].ephemeral",
		addVolume(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})},
	{"a service account token", "spec.podTemplate.spec.volumes[name=token].projected.sources[1].serviceAccountToken",
		addVolume(corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		}}}})},
	{"a projected Secret", "spec.podTemplate.spec.volumes[name=mixed].projected.sources[0].secret",
		addVolume(corev1.Volume{Name: "mixed", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}},
		}}}})},
	{"an env var from a Secret", "spec.podTemplate.spec.containers[name=nats].env[name=DB_PASSWORD].valueFrom.secretKeyRef",
		addContainer(corev1.Container{Name: "nats", Env: []corev1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}})},
	{"env vars from a Secret", "spec.podTemplate.spec.containers[name=helper].envFrom[0].secretRef",
		addContainer(corev1.Container{Name: "helper", Image: "nats:2.15.2-alpine", Command: []string{"sleep", "infinity"},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}})},
	{"a sidecar mounting the config volume", "spec.podTemplate.spec.containers[name=helper].volumeMounts[0]",
		addContainer(corev1.Container{Name: "helper", Image: "nats:2.15.2-alpine", Command: []string{"cat", render.ConfigDir + "/leaf-hub.creds"},
			VolumeMounts: []corev1.VolumeMount{{Name: render.ConfigVolumeName, MountPath: "/config", ReadOnly: true}}})},
	{"a sidecar mounting the JetStream data", "spec.podTemplate.spec.containers[name=helper].volumeMounts[1]", func(nc *clusterv1beta1.NatsCluster) {
		addVolume(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})(nc)
		addContainer(corev1.Container{Name: "helper", Image: "nats:2.15.2-alpine", Command: []string{"sleep", "infinity"},
			VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: render.DataVolumeName, MountPath: "/data"}}})(nc)
	}},
	{"a sidecar mounting the pid volume", "spec.podTemplate.spec.containers[name=helper].volumeMounts[0]",
		addContainer(corev1.Container{Name: "helper", Image: "nats:2.15.2-alpine", Command: []string{"sleep", "infinity"},
			VolumeMounts: []corev1.VolumeMount{{Name: render.PidVolumeName, MountPath: "/pid"}}})},
	{"a sidecar taking the JetStream claim as a device", "spec.podTemplate.spec.containers[name=helper].volumeDevices[0]",
		addContainer(corev1.Container{Name: "helper", Image: "nats:2.15.2-alpine", Command: []string{"sleep", "infinity"},
			VolumeDevices: []corev1.VolumeDevice{{Name: render.DataVolumeName, DevicePath: "/dev/data"}}})},
}

func TestTheRestrictedPolicyRefusesNamingTheFieldAndThePolicy(t *testing.T) {
	for _, tc := range refusedByRestricted {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render.Render(render.Input{Cluster: policyCluster(tc.edit), PodTemplatePolicy: restricted})
			var se *render.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *SpecError", err)
			}
			if out != nil {
				t.Errorf("rendered objects with the refusal %v", err)
			}
			if se.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", se.Field, tc.field, err)
			}
			if want := `is not allowed by the controller's pod template policy "restricted" (--pod-template-policy)`; !strings.Contains(se.Message, want) {
				t.Errorf("message %q does not say %q", se.Message, want)
			}
			t.Log(err)
		})
	}
}

// Under any (and the zero policy) every spec above renders, but the
// hostPath volume, which the restricted Pod Security Standard refuses
// whatever the policy.
func TestTheAnyPolicyAllowsWhatTheCRDAccepts(t *testing.T) {
	for _, policy := range []render.PodTemplatePolicy{{Name: render.PodTemplatePolicyAny}, {}} {
		for _, tc := range refusedByRestricted {
			t.Run(policy.String()+"/"+tc.name, func(t *testing.T) {
				_, err := render.Render(render.Input{Cluster: policyCluster(tc.edit), PodTemplatePolicy: policy})
				switch {
				case strings.HasSuffix(tc.field, "hostPath"):
					if err == nil || strings.Contains(err.Error(), "pod template policy") || !strings.Contains(err.Error(), "Pod Security Standard") {
						t.Errorf("got %v, want the Pod Security Standard's refusal", err)
					}
				case err != nil:
					t.Errorf("refused under %s: %v", policy, err)
				}
			})
		}
	}
}

func TestTheRestrictedPolicyAllowsWhatGivesNoRights(t *testing.T) {
	nc := policyCluster(func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.Image.Repository = "docker.io/library/nats"
		nc.Spec.Metrics.Image = "natsio/prometheus-nats-exporter@sha256:0000000000000000000000000000000000000000000000000000000000000000"
		ps := &nc.Spec.PodTemplate.Spec
		ps.NodeSelector = map[string]string{"kubernetes.io/hostname": "localnode"}
		ps.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "nats", Effect: corev1.TaintEffectNoSchedule}}
		ps.PriorityClassName = "messaging"
		ps.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		ps.Containers = []corev1.Container{
			{Name: "nats", Env: []corev1.EnvVar{{Name: "TEAM", Value: "messaging"}, {Name: "NODE", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "extra", MountPath: "/etc/extra"}}},
			{Name: "helper", Image: "nats:2.15.2-alpine", Command: []string{"sleep", "infinity"},
				EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "info", MountPath: "/info"}, {Name: "bundle", MountPath: "/bundle"}}},
		}
		ps.Volumes = []corev1.Volume{
			{Name: "extra", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}}},
			{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}},
			}}}},
		}
	})
	out, err := render.Render(render.Input{Cluster: nc, PodTemplatePolicy: restricted})
	if err != nil {
		t.Fatal(err)
	}
	pod := out.Servers[0].StatefulSet.Spec.Template.Spec
	if pod.ServiceAccountName != "" || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q automountServiceAccountToken %v, want the default account without its token", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
	}
	if got := container(t, &pod, "helper").Image; got != "nats:2.15.2-alpine" {
		t.Errorf("helper image %q", got)
	}
}

func TestAllowedImagesMatchRepositoriesAndPrefixes(t *testing.T) {
	policy, err := render.ParsePodTemplatePolicy("restricted", " nats , natsio/prometheus-nats-exporter,registry.example.com/team-a/")
	if err != nil {
		t.Fatal(err)
	}
	for image, allowed := range map[string]bool{
		"nats:2.15.2":                            true,
		"nats@sha256:abc":                        true,
		"docker.io/library/nats:2.15.2-alpine":   true,
		"library/nats:2.15.2":                    true,
		"natsio/prometheus-nats-exporter:0.20.1": true,
		"registry.example.com/team-a/logs:1":     true,
		"nats-evil:1":                            false,
		"natsio/nats-box:0.18":                   false,
		"nats/evil:1":                            false,
		"registry.example.com/team-b/logs:1":     false,
		"example.com/nats:2.15.2":                false,
	} {
		nc := policyCluster(addContainer(corev1.Container{Name: "helper", Image: image, Command: []string{"sleep", "infinity"}}))
		_, err := render.Render(render.Input{Cluster: nc, PodTemplatePolicy: policy})
		if got := err == nil; got != allowed {
			t.Errorf("%s: allowed %v, want %v (%v)", image, got, allowed, err)
		}
	}
}

func TestThePolicyFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct{ name, images, want string }{
		{"open", "nats", "must be restricted or any"},
		{"restricted", " , ", "--pod-template-allowed-images is empty"},
	} {
		if _, err := render.ParsePodTemplatePolicy(tc.name, tc.images); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.name, tc.images, err, tc.want)
		}
	}
	p, err := render.ParsePodTemplatePolicy("any", strings.Join(render.DefaultAllowedImages(), ","))
	if err != nil || p.String() != "any" {
		t.Errorf("any: %v %v", p, err)
	}
	if got := strings.Join(render.DefaultAllowedImages(), ","); got != "nats,natsio/prometheus-nats-exporter" {
		t.Errorf("default allowed images %s", got)
	}
}
