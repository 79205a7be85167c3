package localnode

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-operator/nats-operator/test/testenv"
)

// DefaultVersion is the nats-server version of an image without a version
// tag (nats, nats:latest).
const DefaultVersion = "2.15.2"

var semver = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(-(rc|RC|beta|alpha|preview)[.0-9A-Za-z]*)?)`)

// imageVersion returns the nats-server version of an image reference:
// nats:2.15.1, docker.io/library/nats:2.15.1-alpine and
// nats:2.15.1@sha256:... all give 2.15.1.
func imageVersion(image string) (string, error) {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	if tag == "" || tag == "latest" || strings.HasPrefix(tag, "alpine") || strings.HasPrefix(tag, "scratch") {
		return DefaultVersion, nil
	}
	m := semver.FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("image %q: tag %q carries no nats-server version", image, tag)
	}
	return m[1], nil
}

// imageRepository returns an image reference without its tag and digest:
// docker.io/library/nats:2.15.1@sha256:... gives docker.io/library/nats.
func imageRepository(image string) string {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// imageBase returns the last path element of an image's repository:
// nats for docker.io/library/nats:2.15.1.
func imageBase(image string) string {
	ref := imageRepository(image)
	return ref[strings.LastIndex(ref, "/")+1:]
}

// isNATSImage reports whether an image runs nats-server.
func isNATSImage(image string) bool {
	base := imageBase(image)
	return base == "nats" || base == "nats-server"
}

// localImage reports whether the node runs an image as a binary of its own
// (nats-server, the exporter, one of Options.Images or of
// Options.ImageArchives) rather than a host command, so that failing to
// get the binary is reported as a failed image pull.
func (n *Node) localImage(image string) bool {
	return isNATSImage(image) || isExporterImage(image) || n.isMapped(image) || n.archives.has(image)
}

// isMapped reports whether Options.Images maps the image's repository.
func (n *Node) isMapped(image string) bool {
	_, ok := n.opts.Images[imageRepository(image)]
	return ok
}

// mappedBinary returns the binary Options.Images gives an image repository.
func (o Options) mappedBinary(repository string) (string, error) {
	p, ok := o.Images[repository]
	if !ok {
		return "", fmt.Errorf("no binary for image repository %q", repository)
	}
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// commandWord is the command name that stands for the binary of an
// image's containers in commands, hooks and exec probes.
func (n *Node) commandWord(image string) string {
	switch {
	case isExporterImage(image):
		return exporterCommand
	case n.isMapped(image):
		return imageBase(image)
	case n.archives.has(image):
		// The base name of the entrypoint's program, once the image is
		// unpacked (it is before its container starts).
		if im := n.archives.peek(imageRepository(image)); im != nil && len(im.config.Entrypoint) > 0 {
			return path.Base(im.config.Entrypoint[0])
		}
		return imageBase(image)
	}
	return "nats-server"
}

// binaries caches the binary of each version and its digest.
type binaries struct {
	find func(version string) (string, error)

	mu      sync.Mutex
	build   sync.Mutex
	paths   map[string]string
	digests map[string]string
}

func (b *binaries) get(version string) (path, digest string, err error) {
	b.mu.Lock()
	p, ok := b.paths[version]
	d := b.digests[version]
	b.mu.Unlock()
	if ok {
		return p, d, nil
	}
	// One build at a time: the build script shares a temporary directory
	// per version.
	b.build.Lock()
	defer b.build.Unlock()
	b.mu.Lock()
	p, ok = b.paths[version]
	d = b.digests[version]
	b.mu.Unlock()
	if ok {
		return p, d, nil
	}
	p, err = b.find(version)
	if err != nil {
		return "", "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", err
	}
	d = "sha256:" + hex.EncodeToString(h.Sum(nil))
	b.mu.Lock()
	b.paths[version], b.digests[version] = p, d
	b.mu.Unlock()
	return p, d, nil
}

// TestbinBinary returns the nats-server binary of version, built and cached
// by hack/testbin.sh of the repository that holds this package (see
// testenv.NatsServerPath).
func TestbinBinary(version string) (string, error) {
	return testenv.NatsServerPath(version)
}
