package localnode_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/testenv"
)

const exporterImage = "natsio/prometheus-nats-exporter:0.20.1"

// exporterArgs are the sidecar's args as the operator renders them.
var exporterArgs = []string{"-port=7777", "-addr=$(POD_IP)", "-connz", "-routez", "-subz", "-varz", "-healthz", "-jsz=all", "-use_internal_server_name", "http://localhost:8222"}

// metricsPod is a pod with a JetStream nats-server (server name = pod name)
// and the exporter sidecar, command-less as the image's entrypoint is the
// exporter.
func metricsPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "metrics"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{
				{
					Name:  "nats",
					Image: natsImage,
					Args:  []string{"--name", name, "-a", "0.0.0.0", "-m", "8222", "-js", "--store_dir", "/data"},
					Ports: []corev1.ContainerPort{
						{Name: "client", ContainerPort: 4222},
						{Name: "monitor", ContainerPort: 8222},
					},
					VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					ReadinessProbe: httpProbe("/healthz?js-enabled-only=true", 1, 3),
				},
				{
					Name:  "metrics",
					Image: exporterImage,
					Args:  exporterArgs,
					Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"},
					}}},
					Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 7777}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/metrics", Port: intstr.FromString("metrics")}},
						PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 2,
					},
				},
			},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// scrape returns the body of http://ip:7777/metrics.
func scrape(ip string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + ip + ":7777/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	return string(b), nil
}

// sample returns the value of the first sample of metric whose labels
// include every one of labels (name="value" pairs).
func sample(body, metric string, labels ...string) (string, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `(\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(m[1], l)
		}
		if ok {
			return m[2], true
		}
	}
	return "", false
}

// metricNames lists the metric names of a scrape with a prefix.
func metricNames(body, prefix string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			name := l
			if i := strings.IndexAny(l, "{ "); i >= 0 {
				name = l[:i]
			}
			seen[name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// The exporter sidecar runs for real (built from
// third_party/prometheus-nats-exporter): two pods each run nats-server and
// the exporter on port 7777 of their own address; each exporter reaches its
// own pod's server through http://localhost:8222, and serves its
// connections and JetStream figures.
func TestExporterSidecarServesItsOwnServersMetrics(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	node := startNode(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "metrics"
	createNamespace(t, client, ns)
	names := []string{"metrics-0", "metrics-1"}
	for _, name := range names {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, metricsPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	took := poll.Eventually(t, 2*time.Minute, 200*time.Millisecond, "both pods Ready", func() error {
		for _, name := range names {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !kubeutil.PodReady(p) {
				return fmt.Errorf("%s not Ready: %s", name, describe(p))
			}
		}
		return nil
	})
	t.Logf("two pods with nats-server and the exporter Ready %s after creation", took.Round(time.Millisecond))

	bin := testenv.ExporterBinary(t)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	wantID := "natsio/prometheus-nats-exporter@sha256:" + hex.EncodeToString(sum[:])
	for _, name := range names {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != "metrics" {
				continue
			}
			if cs.Image != exporterImage || cs.ImageID != wantID || cs.State.Running == nil || !cs.Ready {
				t.Errorf("status of the metrics container of %s: %+v; want imageID %s", name, cs, wantID)
			}
		}
		b, _ := os.ReadFile(node.ContainerLogPath(ns, name, "metrics"))
		want := fmt.Sprintf("%s -port=7777 -addr=%s -connz", bin, p.Status.PodIP)
		if !strings.Contains(string(b), want) {
			t.Errorf("the exporter of %s did not start as %q:\n%s", name, want, b)
		}
		if name == "metrics-0" {
			t.Logf("log of the exporter of %s:\n%s", name, tail(string(b), 1500))
		}
	}

	// A client and a stream on metrics-0 only.
	ip0 := node.PodAddress(ns, "metrics-0")
	nc, err := nats.Connect("nats://" + ip0 + ":4222")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(sctx, jetstream.StreamConfig{Name: "M", Subjects: []string{"m.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(sctx, "m.x", []byte("hi")); err != nil {
			t.Fatal(err)
		}
	}

	bodies := map[string]string{}
	for _, name := range names {
		ip := node.PodAddress(ns, name)
		server := `server_id="` + name + `"`
		wantConns, wantStreams := "0", "0"
		if name == "metrics-0" {
			wantConns, wantStreams = "1", "1"
		}
		took := poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "the metrics of "+name, func() error {
			body, err := scrape(ip)
			if err != nil {
				return err
			}
			bodies[name] = body
			// -use_internal_server_name labels each figure with the
			// server name of the server behind localhost:8222.
			if v, ok := sample(body, "gnatsd_varz_connections", server); !ok || v != wantConns {
				return fmt.Errorf("gnatsd_varz_connections{%s} = %q (present %v), want %s", server, v, ok, wantConns)
			}
			if v, ok := sample(body, "jetstream_server_total_streams", `server_name="`+name+`"`); !ok || v != wantStreams {
				return fmt.Errorf("jetstream_server_total_streams{server_name=%q} = %q (present %v), want %s", name, v, ok, wantStreams)
			}
			if v, ok := sample(body, "gnatsd_varz_jetstream_config_max_storage", server); !ok || v == "0" {
				return fmt.Errorf("gnatsd_varz_jetstream_config_max_storage{%s} = %q (present %v)", server, v, ok)
			}
			if name == "metrics-0" {
				if v, ok := sample(body, "jetstream_stream_total_messages", `stream_name="M"`); !ok || v != "3" {
					return fmt.Errorf("jetstream_stream_total_messages{stream_name=\"M\"} = %q (present %v), want 3", v, ok)
				}
			}
			return nil
		})
		t.Logf("%s: the exporter at %s:7777 serves its own server's figures (%s)", name, ip, took.Round(time.Millisecond))
	}
	if other := bodies["metrics-1"]; strings.Contains(other, `"metrics-0"`) {
		t.Errorf("the exporter of metrics-1 serves figures of metrics-0")
	}
	for _, l := range strings.Split(bodies["metrics-0"], "\n") {
		for _, m := range []string{"gnatsd_varz_connections{", "jetstream_server_total_streams{", "jetstream_stream_total_messages{"} {
			if strings.HasPrefix(l, m) {
				t.Logf("metrics-0 serves %s", l)
			}
		}
	}
	t.Logf("connection metrics: %s", strings.Join(metricNames(bodies["metrics-0"], "gnatsd_varz_connections"), " "))
	t.Logf("connz metrics: %s", strings.Join(metricNames(bodies["metrics-0"], "gnatsd_connz_"), " "))
	t.Logf("JetStream metrics: %s", strings.Join(metricNames(bodies["metrics-0"], "jetstream_"), " "))
	t.Logf("varz JetStream metrics: %s", strings.Join(metricNames(bodies["metrics-0"], "gnatsd_varz_jetstream"), " "))
	t.Logf("healthz metrics: %s", strings.Join(metricNames(bodies["metrics-0"], "gnatsd_healthz"), " "))
}
