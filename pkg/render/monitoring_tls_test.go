package render_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func monitoringTLS(nc *clusterv1beta1.NatsCluster) {
	nc.Spec.Monitoring = &clusterv1beta1.MonitoringSpec{TLS: true}
}

func containerNamed(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	t.Fatalf("no container %s in %v", name, pod.Containers)
	return nil
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// Under spec.monitoring.tls the probes ask over HTTPS; without it over HTTP.
func TestProbesUseHTTPSUnderMonitoringTLS(t *testing.T) {
	for _, on := range []bool{false, true} {
		opts := []rt.ClusterOption{rt.JetStream(), clientTLSSecret}
		want := corev1.URISchemeHTTP
		if on {
			opts = append(opts, monitoringTLS)
			want = corev1.URISchemeHTTPS
		}
		nc := rt.NewCluster("ns", "demo", opts...)
		out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Client: clientFiles}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range out.Servers {
			c := containerNamed(t, &s.StatefulSet.Spec.Template.Spec, render.ContainerName)
			for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p.HTTPGet == nil || p.HTTPGet.Scheme != want || p.HTTPGet.Port.IntValue() != int(render.MonitorPort) {
					t.Errorf("monitoring.tls=%t: %s: %s probe %+v, want %s on %d", on, s.Name, what, p.HTTPGet, want, render.MonitorPort)
				}
			}
		}
	}
}

// Under spec.monitoring.tls the exporter reads
// https://<name>.<ns>.svc:8222, which a host alias sends to the pod's
// loopback, and verifies it against the client CA alone, projected from
// the Secret's caKey (or the controller's bundle under verifyClients) and
// named by SSL_CERT_FILE.
func TestExporterReadsMonitoringOverVerifiedHTTPS(t *testing.T) {
	bundle := *clientFiles
	bundle.Verify, bundle.CASecret = true, "demo"+render.ClientCASuffix
	for _, tc := range []struct {
		name       string
		files      *render.TLSFiles
		wantSecret string
	}{
		{"secret's CA", clientFiles, "demo-client"},
		{"verifyClients bundle", &bundle, "demo-client-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := rt.NewCluster("ns", "demo", rt.JetStream(), clientTLSSecret, monitoringTLS)
			out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Client: tc.files}})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range out.Servers {
				pod := &s.StatefulSet.Spec.Template.Spec
				c := containerNamed(t, pod, render.ExporterContainerName)
				wantURL := s.Name + ",https://demo.ns.svc:8222"
				if last := c.Args[len(c.Args)-1]; last != wantURL {
					t.Errorf("%s: exporter reads %q, want %q", s.Name, last, wantURL)
				}
				if v, ok := envValue(c, "SSL_CERT_FILE"); !ok || v != render.ExporterCADir+"/ca.crt" {
					t.Errorf("%s: SSL_CERT_FILE %q (set %t)", s.Name, v, ok)
				}
				if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != render.ExporterCAVolumeName || c.VolumeMounts[0].MountPath != render.ExporterCADir || !c.VolumeMounts[0].ReadOnly {
					t.Errorf("%s: exporter mounts %+v", s.Name, c.VolumeMounts)
				}
				i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == render.ExporterCAVolumeName })
				if i < 0 || pod.Volumes[i].Secret == nil {
					t.Fatalf("%s: no secret volume %s in %+v", s.Name, render.ExporterCAVolumeName, pod.Volumes)
				}
				sv := pod.Volumes[i].Secret
				if sv.SecretName != tc.wantSecret || len(sv.Items) != 1 || sv.Items[0].Key != "ca.crt" || sv.Items[0].Path != "ca.crt" {
					t.Errorf("%s: CA volume %+v: want only the CA of %s (never the key)", s.Name, sv, tc.wantSecret)
				}
				wantAlias := []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"demo.ns.svc"}}}
				if !slices.EqualFunc(pod.HostAliases, wantAlias, func(a, b corev1.HostAlias) bool {
					return a.IP == b.IP && slices.Equal(a.Hostnames, b.Hostnames)
				}) {
					t.Errorf("%s: host aliases %+v, want %+v", s.Name, pod.HostAliases, wantAlias)
				}
			}
		})
	}
}

// Without spec.monitoring.tls the exporter reads http://localhost:8222 with
// no CA, volume nor host alias; without metrics there is no host alias
// either.
func TestExporterWithoutMonitoringTLSIsUnchanged(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream(), clientTLSSecret)
	out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Client: clientFiles}})
	if err != nil {
		t.Fatal(err)
	}
	pod := &out.Servers[0].StatefulSet.Spec.Template.Spec
	c := containerNamed(t, pod, render.ExporterContainerName)
	if last := c.Args[len(c.Args)-1]; last != out.Servers[0].Name+",http://localhost:8222" {
		t.Errorf("exporter reads %q", last)
	}
	if _, ok := envValue(c, "SSL_CERT_FILE"); ok || len(c.VolumeMounts) > 0 || len(pod.HostAliases) > 0 {
		t.Errorf("exporter env %+v mounts %+v host aliases %+v", c.Env, c.VolumeMounts, pod.HostAliases)
	}

	off := false
	nc = rt.NewCluster("ns", "demo", rt.JetStream(), clientTLSSecret, monitoringTLS)
	nc.Spec.Metrics.Enabled = &off
	out, err = render.Render(render.Input{Cluster: nc, TLS: render.TLS{Client: clientFiles}})
	if err != nil {
		t.Fatal(err)
	}
	pod = &out.Servers[0].StatefulSet.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.HostAliases) > 0 || slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == render.ExporterCAVolumeName }) {
		t.Errorf("without metrics: containers %d, host aliases %+v, volumes %+v", len(pod.Containers), pod.HostAliases, pod.Volumes)
	}
}

// A client Secret without a CA under spec.monitoring.tls (the controller
// refuses it before rendering): the exporter keeps Go's system roots, so it
// still verifies; nothing turns verification off.
func TestExporterWithoutCAKeepsSystemRoots(t *testing.T) {
	noCA := *clientFiles
	noCA.CAKey = ""
	nc := rt.NewCluster("ns", "demo", rt.JetStream(), clientTLSSecret, monitoringTLS)
	out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Client: &noCA}})
	if err != nil {
		t.Fatal(err)
	}
	pod := &out.Servers[0].StatefulSet.Spec.Template.Spec
	c := containerNamed(t, pod, render.ExporterContainerName)
	if _, ok := envValue(c, "SSL_CERT_FILE"); ok || len(c.VolumeMounts) > 0 {
		t.Errorf("exporter env %+v mounts %+v", c.Env, c.VolumeMounts)
	}
	for _, a := range c.Args {
		if a == "-tlsskipverify" || a == "--tlsskipverify" {
			t.Errorf("exporter args %v", c.Args)
		}
	}
}
