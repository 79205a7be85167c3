package image

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// fakeBinary writes n random bytes standing for the controller's binary.
func fakeBinary(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	p := filepath.Join(t.TempDir(), "nats-operator")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p, data
}

func buildArchive(t *testing.T, o Options, tag string) (string, v1.Hash) {
	t.Helper()
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "image.tar")
	digest, err := WriteArchive(file, img, tag)
	if err != nil {
		t.Fatal(err)
	}
	return file, digest
}

func TestTheSameBinaryGivesTheSameArchive(t *testing.T) {
	bin, _ := fakeBinary(t, 1<<20)
	o := Options{Binary: bin, Version: "v0.2.0", Revision: "0123456789ab", Arch: "amd64"}
	a, da := buildArchive(t, o, "v0.2.0")
	b, db := buildArchive(t, o, "v0.2.0")
	if da != db {
		t.Fatalf("two builds of the same binary gave digests %s and %s", da, db)
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ba, bb) {
		t.Fatal("two builds of the same binary gave archives that differ")
	}
	t.Logf("digest %s, archive %d bytes", da, len(ba))

	other, _ := fakeBinary(t, 1<<20)
	if _, d := buildArchive(t, Options{Binary: other, Version: "v0.2.0", Revision: "0123456789ab", Arch: "amd64"}, "v0.2.0"); d == da {
		t.Fatal("another binary gave the same digest")
	}
	if _, d := buildArchive(t, Options{Binary: bin, Version: "v0.2.1", Revision: "0123456789ab", Arch: "amd64"}, "v0.2.1"); d == da {
		t.Fatal("another version label gave the same digest")
	}
}

// What a runtime reads of the image: its config (user, entrypoint,
// platform, labels) and its one layer's files, read back from the archive
// through the OCI image layout, every digest checked.
func TestTheArchiveHoldsTheImage(t *testing.T) {
	bin, data := fakeBinary(t, 256<<10)
	file, digest := buildArchive(t, Options{Binary: bin, Version: "v0.2.0", Revision: "0123456789ab", Arch: "arm64"}, "v0.2.0")

	got, err := ArchiveDigest(file)
	if err != nil || got != digest {
		t.Fatalf("ArchiveDigest = %s, %v; want %s", got, err, digest)
	}
	img, err := Read(file, filepath.Join(t.TempDir(), "layout"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("the image read back is not valid: %v", err)
	}
	if d, _ := img.Digest(); d != digest {
		t.Fatalf("the image read back has digest %s, want %s", d, digest)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest config %s, layers %+v: want an OCI config and one OCI gzip layer", m.Config.MediaType, m.Layers)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || !cf.Created.Equal(Epoch) {
		t.Errorf("platform %s/%s created %s, want linux/arm64 at the epoch", cf.OS, cf.Architecture, cf.Created)
	}
	if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/nats-operator"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("user %q entrypoint %q cmd %q, want 65532:65532 [/nats-operator] and no cmd", cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.Labels[LabelVersion] != "v0.2.0" || cf.Config.Labels[LabelRevision] != "0123456789ab" {
		t.Errorf("labels %v, want the version and the revision", cf.Config.Labels)
	}

	root := filepath.Join(t.TempDir(), "rootfs")
	if err := Extract(img, root); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p != root {
			rel, _ := filepath.Rel(root, p)
			files = append(files, "/"+rel)
		}
		return err
	})
	if want := []string{"/etc", "/etc/group", "/etc/passwd", "/nats-operator"}; !slices.Equal(files, want) {
		t.Errorf("the image holds %v, want %v", files, want)
	}
	fi, err := os.Stat(filepath.Join(root, "nats-operator"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("/nats-operator has mode %s, want 0755", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(root, "nats-operator")); !bytes.Equal(b, data) {
		t.Error("/nats-operator is not the binary")
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	group, _ := os.ReadFile(filepath.Join(root, "etc", "group"))
	if !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") || !strings.Contains(string(group), "\nnonroot:x:65532:") {
		t.Errorf("/etc/passwd and /etc/group do not name the user the image runs as:\n%s\n%s", passwd, group)
	}
}

func TestArchiveDigestRefusesWhatIsNotAnImageArchive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: 2})
	_, _ = tw.Write([]byte("[]"))
	_ = tw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ArchiveDigest(p); err == nil || !strings.Contains(err.Error(), "no index.json") {
		t.Fatalf("ArchiveDigest of a docker archive = %v, want an error saying it has no index.json", err)
	}
}

// layerImage is an image of one layer holding the given tar entries.
func layerImage(t *testing.T, entries ...*tar.Header) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	_ = tw.Close()
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// A layer that puts a file under a symbolic link to a directory of the
// machine writes nothing there (mutate.Extract drops what lies under a
// non-directory; Extract refuses to write through a link besides).
func TestExtractNeverWritesThroughALink(t *testing.T) {
	outside := t.TempDir()
	img := layerImage(t,
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "escape", Linkname: outside},
		&tar.Header{Typeflag: tar.TypeReg, Name: "escape/planted", Mode: 0o644, Size: 3},
	)
	root := filepath.Join(t.TempDir(), "rootfs")
	err := Extract(img, root)
	if _, serr := os.Stat(filepath.Join(outside, "planted")); serr == nil {
		t.Fatalf("a file was planted outside the image (Extract: %v)", err)
	}
	if err := noLinkBetween(root, filepath.Join(root, "escape", "planted")); err == nil {
		t.Fatal("noLinkBetween let a write through the link escape")
	}
}

func TestResolveFollowsLinksInsideTheImage(t *testing.T) {
	img := layerImage(t,
		&tar.Header{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755},
		&tar.Header{Typeflag: tar.TypeReg, Name: "bin/real", Mode: 0o755, Size: 1},
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/abs", Linkname: "/bin/real"},
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/rel", Linkname: "real"},
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "usr", Linkname: "."},
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/host", Linkname: "/etc/passwd"},
	)
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := Extract(img, root); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "bin", "real")
	for _, p := range []string{"/bin/real", "/bin/abs", "/usr/bin/abs", "bin/rel", "/usr/../../bin/../bin/rel"} {
		got, err := Resolve(root, p)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	// An absolute link names a file of the image, not of the machine.
	if got, err := Resolve(root, "/bin/host"); err == nil {
		t.Errorf("Resolve of a link to /etc/passwd, which the image lacks, gave %q", got)
	}
	if _, err := Resolve(root, "/bin/missing"); err == nil {
		t.Error("Resolve of a missing file succeeded")
	}
}
