package localnode

import (
	"strings"

	"github.com/nats-operator/nats-operator/test/testenv"
)

// exporterCommand is the binary of the exporter image, and the base name of
// its repository (natsio/prometheus-nats-exporter).
const exporterCommand = "prometheus-nats-exporter"

// The ENTRYPOINT and CMD of the exporter's image (docker/linux/Dockerfile
// of prometheus-nats-exporter v0.20.1): a container without a command runs
// the entrypoint with its args, or with --help if it has none either, as a
// container runtime does.
var (
	exporterEntrypoint = []string{"/" + exporterCommand}
	exporterCmd        = []string{"--help"}
)

// isExporterImage reports whether an image runs prometheus-nats-exporter:
// any image whose repository's last path element is
// prometheus-nats-exporter, whatever its registry and tag.
func isExporterImage(image string) bool {
	return imageBase(image) == exporterCommand
}

// exporterListens adds -addr=<pod address> to an exporter command line that
// gives no listen address: the exporter's default, 0.0.0.0, is a wildcard
// listener, which in a pod binds the pod's own interfaces and here would
// bind the machine's, so a second pod's exporter could not listen on
// 7777. An explicit -addr (or -a) is kept as it is (a wildcard there is
// already rewritten to the pod address).
func exporterListens(argv []string, podIP string) []string {
	if podIP == "" || len(argv) == 0 {
		return argv
	}
	for _, a := range argv[1:] {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "addr" || name == "a") {
			return argv
		}
	}
	out := append([]string{argv[0], "-addr=" + podIP}, argv[1:]...)
	return out
}

// TestbinExporter returns the prometheus-nats-exporter binary built and
// cached by hack/testbin.sh exporter from the source vendored in
// third_party/prometheus-nats-exporter (see testenv.ExporterPath).
func TestbinExporter() (string, error) {
	return testenv.ExporterPath()
}
