package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nats-operator/nats-operator/internal/image"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "The static binary to put in the image (required).")
	flag.StringVar(&o.path, "path", "/nats-server", "Where the binary is in the image, an absolute path.")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "The image's entrypoint; empty: -path.")
	flag.StringVar(&o.tag, "tag", "docker.io/library/nats:2.15.2", "The image's whole reference, registry/repository:tag.")
	flag.StringVar(&o.user, "user", "", "The user the image runs as, uid:gid; empty: none set (the runtime's default, root).")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "The image's architecture.")
	flag.StringVar(&o.out, "out", "", "The OCI image archive to write (required).")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "nodeimage:", err)
		os.Exit(1)
	}
}

type options struct {
	binary, path, entrypoint, tag, user, arch, out string
}

func run(o options) error {
	if o.binary == "" || o.out == "" {
		return errors.New("-binary and -out are required")
	}
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	repository, tag, err := splitReference(o.tag)
	if err != nil {
		return err
	}
	if !path.IsAbs(o.path) || path.Clean(o.path) != o.path || o.path == "/" {
		return fmt.Errorf("-path %q: want a clean absolute path to a file", o.path)
	}
	if o.entrypoint == "" {
		o.entrypoint = o.path
	}
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	entries, err := layerEntries(o.path, bin)
	if err != nil {
		return err
	}
	img, err := build(entries, o)
	if err != nil {
		return err
	}
	digest, err := image.WriteArchiveAs(o.out, img, repository, tag)
	if err != nil {
		return err
	}
	fmt.Printf("archive %s\ndigest  %s\nimage   %s:%s@%s\n", o.out, digest, repository, tag, digest)
	return nil
}

// splitReference splits ref, registry/repository:tag, at the tag's colon,
// the last one after the last slash.
func splitReference(ref string) (repository, tag string, err error) {
	if _, err := name.NewTag(ref, name.StrictValidation); err != nil {
		return "", "", fmt.Errorf("-tag %q: %w", ref, err)
	}
	i := strings.LastIndex(ref, ":")
	if i < strings.LastIndex(ref, "/") || !strings.Contains(ref, "/") {
		return "", "", fmt.Errorf("-tag %q: want a whole reference, registry/repository:tag", ref)
	}
	return ref[:i], ref[i+1:], nil
}

// entry is one entry of the layer: a directory when data is nil.
type entry struct {
	name string // absolute
	mode int64
	data []byte
}

// layerEntries returns the layer's entries, in their order in it: /etc
// and internal/image's /etc/group and /etc/passwd, the directories above
// the binary, the binary.
func layerEntries(binPath string, bin []byte) ([]entry, error) {
	var entries []entry
	have := map[string]bool{}
	for _, e := range image.Entries() {
		if e.IsBinary() {
			continue
		}
		if e.Mode.IsDir() {
			entries = append(entries, entry{name: e.Path, mode: int64(e.Mode.Perm())})
		} else {
			entries = append(entries, entry{name: e.Path, mode: int64(e.Mode.Perm()), data: e.Data})
		}
		have[e.Path] = true
	}
	if have[binPath] {
		return nil, fmt.Errorf("-path %s: the image already has it", binPath)
	}
	var dirs []string
	for d := path.Dir(binPath); d != "/"; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		if !have[d] {
			entries = append(entries, entry{name: d, mode: 0o755})
			have[d] = true
		}
	}
	if bin == nil {
		bin = []byte{}
	}
	return append(entries, entry{name: binPath, mode: 0o755, data: bin}), nil
}

// build returns the image: one layer of entries, on nothing.
func build(entries []entry, o options) (v1.Image, error) {
	layerData, err := layerTar(entries)
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
	return mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: o.arch,
		OS:           "linux",
		Created:      v1.Time{Time: image.Epoch},
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
		History: []v1.History{{
			Created:   v1.Time{Time: image.Epoch},
			CreatedBy: "hack/nodeimage: " + o.path + " /etc/group /etc/passwd",
		}},
		Config: v1.Config{
			User:       o.user,
			Entrypoint: []string{o.entrypoint},
		},
	})
}

// layerTar is the gzipped tar of entries: each owned by root, dated Epoch.
func layerTar(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.name, "/"),
			Mode:    e.mode,
			ModTime: image.Epoch,
			Format:  tar.FormatUSTAR,
		}
		if e.data == nil {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
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
