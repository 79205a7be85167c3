package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Repository is the image's repository, the one manifests/controller
// names.
const Repository = "ghcr.io/nats-operator/nats-operator"

// BinaryPath is where the binary is in the image, and User whom it runs
// as: the nonroot user of rootfs/etc/passwd, which the Deployment's
// runAsUser and the backup Jobs' name too.
const (
	BinaryPath = "/nats-operator"
	User       = "65532:65532"
)

// The labels of the image's config.
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
)

// Entrypoint is the image's entrypoint: the binary, whose first argument
// picks what it runs (the controller, or backup and restore for the Jobs).
func Entrypoint() []string { return []string{BinaryPath} }

// Epoch is the time of every file of the layer and of the config.
var Epoch = time.Unix(0, 0).UTC()

//go:embed rootfs/etc/passwd rootfs/etc/group
var rootfs embed.FS

// Entry is one entry of the image's layer.
type Entry struct {
	// Path is where it is in the image, absolute.
	Path string
	// Mode is its permission bits, with fs.ModeDir for a directory.
	Mode fs.FileMode
	// Source is the file of the repository it is a copy of, relative to
	// the repository's root; empty for a directory and for the binary.
	Source string
	// Data is its content; nil for a directory and for the binary.
	Data []byte
}

// IsBinary reports whether e is the binary.
func (e Entry) IsBinary() bool { return e.Path == BinaryPath }

// Entries returns the entries of the image's layer, in their order in it;
// the binary's has no content.
func Entries() []Entry {
	file := func(name string) Entry {
		data, err := rootfs.ReadFile("rootfs" + name)
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		return Entry{Path: name, Mode: 0o644, Source: "internal/image/rootfs" + name, Data: data}
	}
	return []Entry{
		{Path: "/etc", Mode: fs.ModeDir | 0o755},
		file("/etc/group"),
		file("/etc/passwd"),
		{Path: BinaryPath, Mode: 0o755},
	}
}

// Options are what Build needs.
type Options struct {
	// Binary is the controller's binary, built for linux and Arch with
	// CGO_ENABLED=0 (the image has no C library).
	Binary string
	// Version and Revision are the labels org.opencontainers.image.version
	// and .revision; Version "dev" when empty, Revision left out when
	// empty.
	Version, Revision string
	// Arch is the image's architecture; runtime.GOARCH when empty.
	Arch string
}

// Build returns the controller's image around o.Binary. The same binary
// and options give the same image, to the byte.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	layerData, err := layerTar(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	diffID, err := layer.DiffID()
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer}); err != nil {
		return nil, err
	}
	labels := map[string]string{LabelTitle: "nats-operator", LabelVersion: o.Version}
	if o.Revision != "" {
		labels[LabelRevision] = o.Revision
	}
	var paths []string
	for _, e := range Entries() {
		if e.Mode.IsRegular() {
			paths = append(paths, e.Path)
		}
	}
	return mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: o.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: Epoch},
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
		History: []v1.History{{
			Created:   v1.Time{Time: Epoch},
			CreatedBy: "internal/image: " + strings.Join(paths, " "),
		}},
		Config: v1.Config{
			User:       User,
			Entrypoint: Entrypoint(),
			Labels:     labels,
		},
	})
}

// layerTar is the gzipped tar of the layer: every entry owned by root,
// dated Epoch.
func layerTar(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, e := range Entries() {
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.Path, "/"),
			Mode:    int64(e.Mode.Perm()),
			ModTime: Epoch,
			Format:  tar.FormatUSTAR,
		}
		data := e.Data
		switch {
		case e.Mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.IsBinary():
			h.Typeflag, data = tar.TypeReg, bin
		default:
			h.Typeflag = tar.TypeReg
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Reference is the image's reference pinned to its digest:
// ghcr.io/nats-operator/nats-operator:v0.2.0@sha256:...
func Reference(tag string, digest v1.Hash) string {
	return Repository + ":" + tag + "@" + digest.String()
}

// errNoImage is returned for an archive whose index names no image.
var errNoImage = errors.New("the archive's index.json names no image")
