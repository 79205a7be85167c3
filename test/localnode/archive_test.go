package localnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-operator/nats-operator/internal/image"
)

// scriptArchive writes an OCI image archive of the controller's image
// (internal/image) whose binary is a shell script printing its arguments
// after word, and returns the archive and the image's digest.
func scriptArchive(t *testing.T, word string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-operator")
	script := "#!/bin/sh\necho \"" + word + " self=$0 args=$*\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(image.Options{Binary: bin, Version: "v0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.tar")
	digest, err := image.WriteArchive(archive, img, "v0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return archive, digest.String()
}

// An archive is unpacked once, into the directory of its digest, which a
// later node on the same root reuses as it is; its entrypoint runs from
// there, and a command names files of the image, never of the machine.
func TestAnImageArchiveIsUnpackedOnceByDigest(t *testing.T) {
	const repo = image.Repository
	archive, digest := scriptArchive(t, "first")
	root := t.TempDir()
	a := newArchives(root, map[string]string{repo: archive})
	im, err := a.get(repo)
	if err != nil {
		t.Fatal(err)
	}
	wantRootfs := filepath.Join(root, "images", "sha256-"+strings.TrimPrefix(digest, "sha256:"), "rootfs")
	if im.digest != digest || im.rootfs != wantRootfs {
		t.Fatalf("unpacked %s into %s, want %s into %s", im.digest, im.rootfs, digest, wantRootfs)
	}
	bin := filepath.Join(wantRootfs, "nats-operator")
	for _, tt := range []struct {
		name          string
		command, args []string
		want          []string
	}{
		{"the entrypoint", nil, nil, []string{bin}},
		{"the entrypoint with the container's args", nil, []string{"--workers=2"}, []string{bin, "--workers=2"}},
		{"a command naming the binary by its path in the image", []string{"/nats-operator", "backup"}, []string{"--dir=/backup"}, []string{bin, "backup", "--dir=/backup"}},
	} {
		got, err := im.argv(tt.command, tt.args)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: argv = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if got, err := im.argv([]string{"sh", "-c", "true"}, nil); err == nil {
		t.Errorf("a command naming sh, which the image lacks, ran %q", got)
	}
	out, err := exec.Command(bin, "a", "b").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "first self="+bin+" args=a b" {
		t.Fatalf("running the image's entrypoint: %q, %v", out, err)
	}
	if _, err := a.get(repo); err != nil || len(a.images) != 1 {
		t.Fatalf("a second get: %v; the node holds %d images, want 1", err, len(a.images))
	}
	n := &Node{archives: a}
	if w := n.commandWord(repo + ":v0.0.1"); w != "nats-operator" || !n.localImage(repo+":v0.0.1") {
		t.Errorf("commandWord = %q, localImage = %v; want the entrypoint's base name nats-operator, true", w, n.localImage(repo+":v0.0.1"))
	}

	// A later node on the same root takes the unpacked copy as it is.
	marker := filepath.Join(wantRootfs, "marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := newArchives(root, map[string]string{repo: archive}).get(repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil || again.rootfs != wantRootfs {
		t.Fatalf("a second node unpacked the archive again into %s (marker: %v)", again.rootfs, err)
	}
	// Another image gets a directory of its own.
	other, _ := scriptArchive(t, "second")
	im2, err := newArchives(root, map[string]string{repo: other}).get(repo)
	if err != nil {
		t.Fatal(err)
	}
	if im2.rootfs == wantRootfs {
		t.Fatal("another image was given the first one's directory")
	}
	if out, _ := exec.Command(filepath.Join(im2.rootfs, "nats-operator")).Output(); !strings.HasPrefix(string(out), "second ") {
		t.Fatalf("the second image runs %q", out)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, "images", ".unpacking-*"))
	if len(leftovers) > 0 {
		t.Errorf("unpacking left %v", leftovers)
	}
}
