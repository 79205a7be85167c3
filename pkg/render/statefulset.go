package render

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Pod security: the restricted Pod Security Standard.
const (
	RunAsUser  int64 = 1000
	RunAsGroup int64 = 1000
)

// statefulSet renders one server's StatefulSet, with the revision annotation
// set to rev ("" while the revision is being computed). Fields the API
// server would default are set to those defaults, so that the StatefulSet
// read back compares equal (apiequality.Semantic) to the rendered one. A
// cluster the pod template policy does not allow gives its *SpecError.
func statefulSet(nc *clusterv1beta1.NatsCluster, ordinal int32, rev string, tls TLS, leafCredentials bool, policy PodTemplatePolicy) (*appsv1.StatefulSet, error) {
	name := ServerName(nc.Name, ordinal)
	spec := &nc.Spec
	labels := ServerLabels(nc.Name, ordinal)

	podLabels := ServerLabels(nc.Name, ordinal)
	annotations := map[string]string{}
	if rev != "" {
		annotations[clusterv1beta1.AnnotationConfigRevision] = rev
	}

	startup, readiness, liveness := probes(spec)

	f := false
	t := true
	resources := NatsResources(spec)
	grace := TerminationGracePeriodOf(spec)
	// The official nats image (FROM scratch) holds the server at /nats-server
	// with no shell and no PATH entry for /, so commands name it absolutely.
	container := corev1.Container{
		Name:    ContainerName,
		Image:   imageRef(spec),
		Command: []string{ServerBinary, "--config", ConfigPath},
		Ports: []corev1.ContainerPort{
			{Name: ClientPortName, ContainerPort: ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: ClusterPortName, ContainerPort: ClusterPort, Protocol: corev1.ProtocolTCP},
			{Name: MonitorPortName, ContainerPort: MonitorPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: resources,
		VolumeMounts: []corev1.VolumeMount{
			{Name: ConfigVolumeName, MountPath: ConfigDir, ReadOnly: true},
			{Name: DataVolumeName, MountPath: DataDir},
			{Name: PidVolumeName, MountPath: PidDir},
		},
		StartupProbe:   startup,
		ReadinessProbe: readiness,
		LivenessProbe:  liveness,
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{ServerBinary, "--signal", "ldm=" + PidFile}},
		}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		SecurityContext:          restrictedContainerContext(),
	}
	if spec.Gateway != nil {
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: GatewayPortName, ContainerPort: GatewayPort, Protocol: corev1.ProtocolTCP})
	}
	if spec.LeafNodes != nil && spec.LeafNodes.Accept {
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: LeafNodePortName, ContainerPort: LeafNodePort, Protocol: corev1.ProtocolTCP})
	}
	container.Ports = append(container.Ports, listenerContainerPorts(spec)...)
	if gml := GoMemLimit(resources); gml != "" {
		container.Env = []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: gml}}
	}

	volumes := []corev1.Volume{
		{Name: ConfigVolumeName, VolumeSource: configVolume(nc.Name, ConfigMapName(nc.Name, ordinal), tls, leafCredentials)},
		{Name: PidVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	var claims []corev1.PersistentVolumeClaim
	if js := spec.JetStream; js != nil && js.VolumeClaimTemplate != nil {
		vct := js.VolumeClaimTemplate
		claimLabels := ServerLabels(nc.Name, ordinal)
		for k, v := range vct.Metadata.Labels {
			claimLabels[k] = string(v)
		}
		// Our labels win over the template's: selectors and the controller
		// rely on them.
		maps.Copy(claimLabels, ServerLabels(nc.Name, ordinal))
		var claimAnnotations map[string]string
		if len(vct.Metadata.Annotations) > 0 {
			claimAnnotations = maps.Clone(vct.Metadata.Annotations)
		}
		claims = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{
				Name:        DataVolumeName,
				Labels:      claimLabels,
				Annotations: claimAnnotations,
			},
			Spec:   claimSpec(&vct.Spec),
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
		}}
	} else {
		volumes = append(volumes, corev1.Volume{Name: DataVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}

	containers := []corev1.Container{container}
	var hostAliases []corev1.HostAlias
	if spec.Metrics.IsEnabled() {
		exporter := exporterContainer(nc, name, tls)
		containers = append(containers, exporter.container)
		volumes = append(volumes, exporter.volumes...)
		hostAliases = exporter.hostAliases
	}

	one := int32(1)
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(nc, name, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &one,
			Selector:            &metav1.LabelSelector{MatchLabels: ServerSelector(nc.Name, ordinal)},
			ServiceName:         HeadlessServiceName(nc.Name),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// The controller alone restarts a server, by deleting its pod
			// at its step: a template change restarts nothing by itself,
			// so a step writes the template first and has the API
			// server's verdict on it before anything that does
			// (pkg/controller: restart).
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			RevisionHistoryLimit: ptr(int32(10)),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					Containers:                    containers,
					RestartPolicy:                 corev1.RestartPolicyAlways,
					DNSPolicy:                     corev1.DNSClusterFirst,
					SchedulerName:                 corev1.DefaultSchedulerName,
					Volumes:                       volumes,
					TerminationGracePeriodSeconds: &grace,
					AutomountServiceAccountToken:  &f,
					EnableServiceLinks:            &f,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:        &t,
						RunAsUser:           ptr(RunAsUser),
						RunAsGroup:          ptr(RunAsGroup),
						FSGroup:             ptr(RunAsGroup),
						FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
						SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Affinity:    DefaultAffinity(nc.Name),
					HostAliases: hostAliases,
				},
			},
			VolumeClaimTemplates: claims,
		},
	}
	// The policy first, against the pod as rendered: what it refuses is
	// named as the policy's, whatever else the merge would say.
	if err := policy.check(spec, &sts.Spec.Template.Spec); err != nil {
		return nil, err
	}
	if err := applyPodTemplate(spec, &sts.Spec.Template); err != nil {
		return nil, err
	}
	return sts, nil
}

// DefaultAffinity spreads a cluster's servers across nodes and, where nodes
// carry zone labels, across zones: preferred, so a cluster still runs on
// fewer nodes than servers. A podTemplate's affinity or topology spread
// replaces it.
func DefaultAffinity(cluster string) *corev1.Affinity {
	term := func(weight int32, key string) corev1.WeightedPodAffinityTerm {
		return corev1.WeightedPodAffinityTerm{
			Weight: weight,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: ClusterSelector(cluster)},
				TopologyKey:   key,
			},
		}
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			term(100, corev1.LabelHostname),
			term(50, corev1.LabelTopologyZone),
		},
	}}
}

// Under spec.monitoring.tls the exporter reads the monitoring port over
// HTTPS and verifies its certificate. prometheus-nats-exporter (0.20.1)
// has no flag for the CA of the URL it reads (its collector uses Go's
// default transport), but Go takes the roots from SSL_CERT_FILE: the
// client CA alone (the Secret's caKey, or with spec.tls.verifyClients the
// bundle of <name>-client-ca) is projected into a volume of its own (the
// exporter never sees the server's key), and SSL_CERT_FILE names it. The
// certificate is for the client Service's names, not localhost, so the
// exporter asks https://<name>.<namespace>.svc:8222 and a host alias
// resolves that name to the pod's own loopback (the servers never dial
// the client Service: routes, gateways and leaf remotes use the headless
// one). Go reads SSL_CERT_FILE once, so a new CA reaches the exporter when
// its pod restarts; a certificate renewed under the same CA at once.
// Without a CA (a Secret without caKey; the controller refuses that
// combination, CertificateNotReady, before rendering) the exporter keeps
// Go's system roots: it verifies all the same, and fails unless a public
// CA signed the certificate. Never InsecureSkipVerify.
const (
	// ExporterCAVolumeName is the exporter's volume of the client CA.
	ExporterCAVolumeName = "monitor-ca"
	// ExporterCADir is where it is mounted in the exporter.
	ExporterCADir = "/etc/nats-monitor-ca"
)

// MonitorHost is the name the exporter reads the monitoring port by under
// spec.monitoring.tls: the client Service's "<name>.<namespace>.svc", which
// the client certificate is for.
func MonitorHost(nc *clusterv1beta1.NatsCluster) string {
	return nc.Name + "." + nc.Namespace + ".svc"
}

// exporter is the sidecar and what the pod needs for it.
type exporter struct {
	container   corev1.Container
	volumes     []corev1.Volume
	hostAliases []corev1.HostAlias
}

// exporterContainer is the prometheus-nats-exporter sidecar: it reads the
// server's monitoring endpoints over localhost (under spec.monitoring.tls
// over HTTPS by the client Service's name, see ExporterCAVolumeName) and
// serves them to Prometheus on the pod's address, port metrics.
func exporterContainer(nc *clusterv1beta1.NatsCluster, server string, tls TLS) exporter {
	spec := &nc.Spec
	image := spec.Metrics.Image
	if image == "" {
		image = clusterv1beta1.DefaultExporterImage
	}
	var out exporter
	url := fmt.Sprintf("http://localhost:%d", MonitorPort)
	env := []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
	}}}
	var mounts []corev1.VolumeMount
	if MonitorTLS(spec) {
		url = fmt.Sprintf("https://%s:%d", MonitorHost(nc), MonitorPort)
		out.hostAliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{MonitorHost(nc)}}}
		if c := tls.Client; c != nil && c.CAKey != "" {
			secret := c.Secret
			if c.CASecret != "" {
				secret = c.CASecret
			}
			out.volumes = []corev1.Volume{{Name: ExporterCAVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  secret,
				Items:       []corev1.KeyToPath{{Key: c.CAKey, Path: tlsCAFile}},
				DefaultMode: ptr(corev1.SecretVolumeSourceDefaultMode),
			}}}}
			mounts = []corev1.VolumeMount{{Name: ExporterCAVolumeName, MountPath: ExporterCADir, ReadOnly: true}}
			env = append(env, corev1.EnvVar{Name: "SSL_CERT_FILE", Value: ExporterCADir + "/" + tlsCAFile})
		}
	}
	out.container = corev1.Container{
		Name:  ExporterContainerName,
		Image: image,
		Args: []string{
			fmt.Sprintf("-port=%d", MetricsPort), "-addr=$(POD_IP)",
			"-connz", "-routez", "-subz", "-varz", "-healthz", "-jsz=all",
			// The server's name labels its metrics (server_id). Not
			// -use_internal_server_name: with it the exporter reads /varz
			// before it listens, retrying, and does not stop on SIGTERM
			// meanwhile, so the pod of a server that never started took its
			// whole grace period to go (measured by the stuck-server e2e).
			server + "," + url,
		},
		Env:          env,
		VolumeMounts: mounts,
		Ports:        []corev1.ContainerPort{{Name: MetricsPortName, ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		SecurityContext:          restrictedContainerContext(),
	}
	return out
}

// claimSpec is the claim template's spec with the API server's defaults
// filled in (volumeMode Filesystem), so a template read back compares equal,
// and accessModes defaulted to [ReadWriteOnce] when absent or empty, as the
// earlier operator did: the API server requires at least one, and each claim
// is used by one server's pod only. (Defaulted here, not in the CRD schema:
// the claim spec is core/v1's type, whose schema controller-gen copies, and a
// manifest that worked with the earlier operator must work unchanged.)
func claimSpec(in *corev1.PersistentVolumeClaimSpec) corev1.PersistentVolumeClaimSpec {
	out := *in.DeepCopy()
	if len(out.AccessModes) == 0 {
		out.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	if out.VolumeMode == nil {
		out.VolumeMode = ptr(corev1.PersistentVolumeFilesystem)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
