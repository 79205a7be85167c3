package localnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nats-operator/nats-operator/internal/image"
)

// archives runs the images of Options.ImageArchives: each archive is
// unpacked once per node, into Root/images/<algorithm>-<hex of its
// digest>/rootfs, which a later node on the same Root reuses.
type archives struct {
	root  string
	files map[string]string // repository -> OCI image archive

	build  sync.Mutex // one unpacking at a time
	mu     sync.Mutex
	images map[string]*archiveImage // by repository
}

// archiveImage is an unpacked image: its files and its config.
type archiveImage struct {
	digest string // sha256:...
	rootfs string
	config v1.Config
}

func newArchives(root string, files map[string]string) *archives {
	return &archives{root: filepath.Join(root, "images"), files: files, images: map[string]*archiveImage{}}
}

// has reports whether the node has an archive of the image's repository
// (none when a is nil).
func (a *archives) has(ref string) bool {
	if a == nil {
		return false
	}
	_, ok := a.files[imageRepository(ref)]
	return ok
}

// peek returns the image of the repository if it was unpacked.
func (a *archives) peek(repository string) *archiveImage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.images[repository]
}

// get returns the image of the repository, unpacking its archive on first
// use.
func (a *archives) get(repository string) (*archiveImage, error) {
	if im := a.peek(repository); im != nil {
		return im, nil
	}
	a.build.Lock()
	defer a.build.Unlock()
	if im := a.peek(repository); im != nil {
		return im, nil
	}
	file, ok := a.files[repository]
	if !ok {
		return nil, fmt.Errorf("no archive of image repository %q", repository)
	}
	im, err := a.unpack(file)
	if err != nil {
		return nil, fmt.Errorf("image archive %s: %w", file, err)
	}
	a.mu.Lock()
	a.images[repository] = im
	a.mu.Unlock()
	return im, nil
}

// unpack unpacks an archive into the directory of its digest, unless a
// complete one is there, and reads the image's config.
func (a *archives) unpack(file string) (*archiveImage, error) {
	digest, err := image.ArchiveDigest(file)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(a.root, digest.Algorithm+"-"+digest.Hex)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(a.root, 0o755); err != nil {
			return nil, err
		}
		tmp, err := os.MkdirTemp(a.root, ".unpacking-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		img, err := image.Read(file, filepath.Join(tmp, "layout"))
		if err != nil {
			return nil, err
		}
		if err := image.Extract(img, filepath.Join(tmp, "rootfs")); err != nil {
			return nil, err
		}
		raw, err := img.RawConfigFile()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, "config.json"), raw, 0o644); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(filepath.Join(tmp, "layout")); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
			return nil, err
		}
		// Another node on this Root may have finished first: its copy is
		// the same.
		if err := os.Rename(tmp, dir); err != nil {
			if _, serr := os.Stat(filepath.Join(dir, ".complete")); serr != nil {
				return nil, err
			}
		}
	} else if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	var cf v1.ConfigFile
	if err := json.Unmarshal(raw, &cf); err != nil {
		return nil, fmt.Errorf("the image's config: %w", err)
	}
	return &archiveImage{digest: digest.String(), rootfs: filepath.Join(dir, "rootfs"), config: cf.Config}, nil
}

// defaultPath is the PATH a container runtime gives an image without one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// resolve returns the local file of a program of the image: a path inside
// it, or a name looked up in the image's PATH there.
func (im *archiveImage) resolve(name string) (string, error) {
	if strings.Contains(name, "/") {
		p, err := image.Resolve(im.rootfs, name)
		if err != nil {
			return "", fmt.Errorf("%s is not in the image: %w", name, err)
		}
		return p, nil
	}
	dirs := defaultPath
	for _, e := range im.config.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			dirs = v
		}
	}
	for _, d := range strings.Split(dirs, ":") {
		if p, err := image.Resolve(im.rootfs, path.Join("/", d, name)); err == nil {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s is not in the image's PATH (%s)", name, dirs)
}

// argv returns the command line of a container of the image, as a
// container runtime makes it: the image's entrypoint and, when the
// container gives no args, its cmd; a container's command replaces the
// entrypoint (and the cmd). The program is the image's own file.
func (im *archiveImage) argv(command, args []string) ([]string, error) {
	argv := append([]string(nil), command...)
	if len(command) == 0 {
		argv = append(argv, im.config.Entrypoint...)
		if len(args) == 0 {
			args = im.config.Cmd
		}
	}
	argv = append(argv, args...)
	if len(argv) == 0 {
		return nil, errors.New("the image has no entrypoint nor cmd, and the container no command")
	}
	p, err := im.resolve(argv[0])
	if err != nil {
		return nil, err
	}
	argv[0] = p
	return argv, nil
}

// referenceDigest is the digest a reference names after @, or "".
func referenceDigest(ref string) string {
	if _, d, ok := strings.Cut(ref, "@"); ok {
		return d
	}
	return ""
}
