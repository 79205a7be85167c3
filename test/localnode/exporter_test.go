package localnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExporterImages(t *testing.T) {
	for _, tt := range []struct {
		image    string
		exporter bool
		repo     string
	}{
		{"natsio/prometheus-nats-exporter:0.20.1", true, "natsio/prometheus-nats-exporter"},
		{"docker.io/natsio/prometheus-nats-exporter:0.20.1@sha256:00", true, "docker.io/natsio/prometheus-nats-exporter"},
		{"localhost:5000/mirror/prometheus-nats-exporter", true, "localhost:5000/mirror/prometheus-nats-exporter"},
		{"prometheus-nats-exporter:latest", true, "prometheus-nats-exporter"},
		{"nats:2.15.2", false, "nats"},
		{"natsio/prometheus-nats-exporter-fork:1", false, "natsio/prometheus-nats-exporter-fork"},
		{"prometheus-nats-exporter/other:1", false, "prometheus-nats-exporter/other"},
	} {
		if got := isExporterImage(tt.image); got != tt.exporter {
			t.Errorf("isExporterImage(%q) = %v, want %v", tt.image, got, tt.exporter)
		}
		if got := imageRepository(tt.image); got != tt.repo {
			t.Errorf("imageRepository(%q) = %q, want %q", tt.image, got, tt.repo)
		}
	}
	n := &Node{opts: Options{Images: map[string]string{"ghcr.io/nats-operator/nats-operator": "/bin/true"}}}
	if n.commandWord("natsio/prometheus-nats-exporter:0.20.1") != "prometheus-nats-exporter" || n.commandWord("nats:2.15.2") != "nats-server" ||
		n.commandWord("ghcr.io/nats-operator/nats-operator:v0.1.0") != "nats-operator" {
		t.Errorf("commandWord misjudged an image")
	}
	if !n.localImage("natsio/prometheus-nats-exporter:0.20.1") || !n.localImage("nats") || n.localImage("busybox:1.37") ||
		!n.localImage("ghcr.io/nats-operator/nats-operator:v0.1.0") || n.localImage("ghcr.io/nats-operator/other:v0.1.0") {
		t.Errorf("localImage misjudged an image")
	}
}

func TestExporterListensOnThePodAddress(t *testing.T) {
	const bin = "/cache/prometheus-nats-exporter"
	tests := []struct {
		name     string
		in, want []string
	}{
		{
			"an explicit -addr is kept",
			[]string{bin, "-port=7777", "-addr=127.0.0.5", "-varz", "http://localhost:8222"},
			[]string{bin, "-port=7777", "-addr=127.0.0.5", "-varz", "http://localhost:8222"},
		},
		{
			"-a with a separate value is kept",
			[]string{bin, "-a", "127.0.0.5", "http://localhost:8222"},
			[]string{bin, "-a", "127.0.0.5", "http://localhost:8222"},
		},
		{
			"--addr= is kept",
			[]string{bin, "--addr=127.0.0.5", "http://localhost:8222"},
			[]string{bin, "--addr=127.0.0.5", "http://localhost:8222"},
		},
		{
			"no listen address gets the pod address first",
			[]string{bin, "-port=7777", "-varz", "http://localhost:8222"},
			[]string{bin, "-addr=127.0.0.2", "-port=7777", "-varz", "http://localhost:8222"},
		},
		{
			"a flag that only starts like addr does not count",
			[]string{bin, "-address_family=x", "http://localhost:8222"},
			[]string{bin, "-addr=127.0.0.2", "-address_family=x", "http://localhost:8222"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, exporterListens(tt.in, "127.0.0.2")); diff != "" {
				t.Errorf("exporterListens(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRewriterCommandOfTheExporter(t *testing.T) {
	r := &rewriter{podIP: "127.0.0.2", binary: "/cache/pne/prometheus-nats-exporter", command: exporterCommand}
	tests := []struct {
		name     string
		in, want []string
	}{
		{
			"the image's entrypoint uses the local binary, a wildcard -addr the pod address",
			[]string{"/prometheus-nats-exporter", "-port=7777", "-addr=0.0.0.0", "-varz", "http://localhost:8222"},
			[]string{"/cache/pne/prometheus-nats-exporter", "-port=7777", "-addr=127.0.0.2", "-varz", "http://localhost:8222"},
		},
		{
			"a bare command word uses the local binary",
			[]string{"prometheus-nats-exporter", "-version"},
			[]string{"/cache/pne/prometheus-nats-exporter", "-version"},
		},
		{
			"a shell string has the command word rewritten, not nats-server",
			[]string{"sh", "-c", "/prometheus-nats-exporter -version && nats-server --version"},
			[]string{"sh", "-c", "/cache/pne/prometheus-nats-exporter -version && nats-server --version"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, r.Command(tt.in)); diff != "" {
				t.Errorf("Command(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}
