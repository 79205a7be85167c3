package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of the image in the archive's index.json: the tag (the
// OCI image layout's own name) and the whole reference (the one container
// runtimes that import an archive use as its name).
const (
	AnnotationRefName   = "org.opencontainers.image.ref.name"
	AnnotationImageName = "io.containerd.image.name"
)

// WriteArchive writes img to file as an OCI image layout in a tar file,
// its index.json naming it repository:tag, and returns its digest. The
// tar's entries are in a fixed order, dated Epoch and owned by root, so
// the same image gives the same file. The file is written whole or not at
// all.
func WriteArchive(file string, img v1.Image, tag string) (v1.Hash, error) {
	return WriteArchiveAs(file, img, Repository, tag)
}

// WriteArchiveAs is WriteArchive for an image of another repository
// (hack/nodeimage's): index.json names it repository:tag.
func WriteArchiveAs(file string, img v1.Image, repository, tag string) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return v1.Hash{}, err
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mediaType,
			Size:      int64(len(manifest)),
			Digest:    digest,
			Annotations: map[string]string{
				AnnotationRefName:   tag,
				AnnotationImageName: repository + ":" + tag,
			},
		}},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return v1.Hash{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}

	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: Epoch, Format: tar.FormatUSTAR})
	}
	put := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: Epoch, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	layoutFile := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	steps := []func() error{
		func() error { return put("oci-layout", int64(len(layoutFile)), bytes.NewReader(layoutFile)) },
		func() error { return put("index.json", int64(len(index)), bytes.NewReader(index)) },
		func() error { return dir("blobs/") },
		func() error { return dir("blobs/sha256/") },
		func() error { return put(blob(digest), int64(len(manifest)), bytes.NewReader(manifest)) },
		func() error { return put(blob(configDigest), int64(len(config)), bytes.NewReader(config)) },
	}
	for _, l := range layers {
		steps = append(steps, func() error {
			d, err := l.Digest()
			if err != nil {
				return err
			}
			size, err := l.Size()
			if err != nil {
				return err
			}
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			defer rc.Close()
			return put(blob(d), size, rc)
		})
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return v1.Hash{}, fmt.Errorf("writing %s: %w", file, err)
		}
	}
	if err := tw.Close(); err != nil {
		return v1.Hash{}, err
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, err
	}
	return digest, os.Rename(tmp, file)
}

// ArchiveDigest returns the digest of the one image an OCI image archive
// holds, as its index.json names it.
func ArchiveDigest(file string) (v1.Hash, error) {
	f, err := os.Open(file)
	if err != nil {
		return v1.Hash{}, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return v1.Hash{}, fmt.Errorf("%s: no index.json: not an OCI image archive", file)
		}
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", file, err)
		}
		if path.Clean(h.Name) != "index.json" {
			continue
		}
		var index v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return v1.Hash{}, fmt.Errorf("%s: index.json: %w", file, err)
		}
		return onlyImage(file, &index)
	}
}

func onlyImage(file string, index *v1.IndexManifest) (v1.Hash, error) {
	switch {
	case len(index.Manifests) == 0:
		return v1.Hash{}, fmt.Errorf("%s: %w", file, errNoImage)
	case len(index.Manifests) > 1:
		return v1.Hash{}, fmt.Errorf("%s: the archive holds %d images, want one", file, len(index.Manifests))
	case !index.Manifests[0].MediaType.IsImage():
		return v1.Hash{}, fmt.Errorf("%s: the archive holds a %s, want an image", file, index.Manifests[0].MediaType)
	}
	return index.Manifests[0].Digest, nil
}

// Read unpacks an OCI image archive into dir, an OCI image layout then,
// and returns the one image it holds, read from there (so dir must stay
// while the image is used). The manifest is checked against the digest
// index.json names.
func Read(file, dir string) (v1.Image, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("%s: entry %q lies outside the layout", file, h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return nil, err
			}
			if err := writeFile(target, tr, 0o644); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: entry %q is neither a file nor a directory", file, h.Name)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	index, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	digest, err := onlyImage(file, index)
	if err != nil {
		return nil, err
	}
	img, err := idx.Image(digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if got, _, _ := v1.SHA256(bytes.NewReader(raw)); got != digest {
		return nil, fmt.Errorf("%s: the manifest's digest is %s, index.json names %s", file, got, digest)
	}
	return img, nil
}

func writeFile(name string, r io.Reader, mode fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Extract writes the files of img (its layers applied in order) into dir,
// which must be empty or absent: regular files, directories, symbolic and
// hard links, with their permission bits (not setuid nor setgid) and
// not their owners; other entries (devices, pipes) are left out. No entry
// is written outside dir, nor through a symbolic link.
func Extract(img v1.Image, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + h.Name)[1:]
		if name == "" {
			continue
		}
		if !filepath.IsLocal(name) {
			return fmt.Errorf("layer entry %q lies outside the image", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := noLinkBetween(dir, target); err != nil {
			return err
		}
		mode := h.FileInfo().Mode()&fs.ModePerm | h.FileInfo().Mode()&fs.ModeSticky
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, mode})
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := writeFile(target, tr, 0o600); err != nil {
				return err
			}
			if err := os.Chmod(target, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			src := path.Clean("/" + h.Linkname)[1:]
			if !filepath.IsLocal(src) {
				return fmt.Errorf("layer entry %q links to %q outside the image", h.Name, h.Linkname)
			}
			from := filepath.Join(dir, filepath.FromSlash(src))
			if err := noLinkBetween(dir, from); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Link(from, target); err != nil {
				return err
			}
		}
	}
	// Directories get their modes last, so a read-only one was writable
	// while its files were written; the deepest first.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}

// noLinkBetween fails when a directory between root and target (both
// excluded) is a symbolic link, through which writing target would land
// elsewhere.
func noLinkBetween(root, target string) error {
	rel, err := filepath.Rel(root, filepath.Dir(target))
	if err != nil || rel == "." {
		return err
	}
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: a symbolic link inside the image on the way to %s", p, target)
		}
	}
	return nil
}

// Resolve returns the file that path, a path inside the image whose files
// Extract wrote into root, names on this machine, following symbolic links
// as the image would (an absolute link target is relative to root), never
// out of root.
func Resolve(root, name string) (string, error) {
	parts := strings.Split(strings.Trim(path.Clean("/"+name), "/"), "/")
	resolved := ""
	for hops := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			resolved = path.Dir("/" + resolved)[1:]
			continue
		}
		next := path.Join(resolved, part)
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(next)))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many symbolic links", name)
		}
		link, err := os.Readlink(filepath.Join(root, filepath.FromSlash(next)))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(link, "/") {
			resolved = ""
		}
		parts = append(strings.Split(link, "/"), parts...)
	}
	return filepath.Join(root, filepath.FromSlash(resolved)), nil
}
