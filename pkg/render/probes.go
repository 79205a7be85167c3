package render

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Health check paths, by what they wait for. nats-server's /healthz flags,
// read from server/monitor.go of 2.15 and the change history:
//
//   - js-server-only=true: from 2.11 only "is the server ready for
//     connections"; up to 2.10 it also waited for the JetStream meta layer
//     (a meta leader and this server current with it).
//   - js-meta-only=true (2.11 and later): the server is ready, JetStream is
//     enabled and the meta layer has a leader this server is current with;
//     streams and consumers are not checked. This is what js-server-only
//     meant up to 2.10 (nats-server pull request 6649).
//   - js-enabled-only=true: the server is ready and JetStream is enabled;
//     neither meta layer nor assets are checked.
//
// Without JetStream in the config every flag stops after "the server is
// ready", so the same paths serve servers without JetStream.
const (
	HealthzMetaOnly       = "/healthz?js-meta-only=true"
	HealthzServerOnly     = "/healthz?js-server-only=true"
	HealthzEnabledOnly    = "/healthz?js-enabled-only=true"
	healthzLegacyMetaOnly = HealthzServerOnly
)

// ProbePaths are the /healthz paths of a server version's probes.
type ProbePaths struct {
	// Startup waits for the JetStream meta layer.
	Startup string
	// Readiness waits for the server to accept connections.
	Readiness string
	// Liveness checks JetStream is (still) enabled.
	Liveness string
}

// ProbePathsFor returns the probe paths for a nats-server version
// ("2.15.2", "2.11.0-RC.1"). From 2.11: startup js-meta-only, readiness
// js-server-only, liveness js-enabled-only. Before 2.11, where js-meta-only
// does not exist and js-server-only meant meta: startup js-server-only,
// readiness and liveness js-enabled-only. A version that does not parse is
// treated as current.
func ProbePathsFor(version string) ProbePaths {
	major, minor, ok := majorMinor(version)
	if ok && (major < 2 || (major == 2 && minor < 11)) {
		return ProbePaths{Startup: healthzLegacyMetaOnly, Readiness: HealthzEnabledOnly, Liveness: HealthzEnabledOnly}
	}
	return ProbePaths{Startup: HealthzMetaOnly, Readiness: HealthzServerOnly, Liveness: HealthzEnabledOnly}
}

func majorMinor(version string) (int, int, bool) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// Probe timings. Startup is asked every 2 s, so a restarted server that
// rejoins the meta group in a second or two is Ready (and the rollout's gate
// can open) within about 2 s, not 10; it allows 15 minutes (450 x 2s) for a
// slow catch-up before the kubelet gives up. Liveness only runs after
// startup succeeded. Under spec.monitoring.tls the probes ask over HTTPS
// (ProbeScheme): the kubelet does not verify the certificate, and the
// monitoring port then refuses plain HTTP.
func probes(spec *clusterv1beta1.NatsClusterSpec) (startup, readiness, liveness *corev1.Probe) {
	paths := ProbePathsFor(spec.Version)
	scheme := ProbeScheme(spec)
	get := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path:   path,
			Port:   intstr.FromInt32(MonitorPort),
			Scheme: scheme,
		}}
	}
	startup = &corev1.Probe{
		ProbeHandler:     get(paths.Startup),
		TimeoutSeconds:   2,
		PeriodSeconds:    2,
		SuccessThreshold: 1,
		FailureThreshold: 450,
	}
	readiness = &corev1.Probe{
		ProbeHandler:     get(paths.Readiness),
		TimeoutSeconds:   5,
		PeriodSeconds:    5,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	liveness = &corev1.Probe{
		ProbeHandler:     get(paths.Liveness),
		TimeoutSeconds:   5,
		PeriodSeconds:    30,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	return startup, readiness, liveness
}

// ProbeScheme is the scheme of the probes: HTTPS under spec.monitoring.tls,
// else HTTP. A pod's probes say which scheme its server's monitoring port
// was started with (the port's scheme is not reloaded: a change restarts
// the server with a new pod), which is how the controller knows how to ask
// each server while a change of spec.monitoring.tls rolls.
func ProbeScheme(spec *clusterv1beta1.NatsClusterSpec) corev1.URIScheme {
	if MonitorTLS(spec) {
		return corev1.URISchemeHTTPS
	}
	return corev1.URISchemeHTTP
}
