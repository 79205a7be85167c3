package release

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nats-operator/nats-operator/internal/image"
)

func TestNormalizeVersion(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"0.2.0", "v0.2.0"},
		{"v0.2.0", "v0.2.0"},
		{"1.10.3-rc.1", "v1.10.3-rc.1"},
	} {
		if got, err := NormalizeVersion(tt.in); err != nil || got != tt.want {
			t.Errorf("NormalizeVersion(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "0.2", "v", "latest", "0.2.0 ", "0.2.0/../x", "vv0.2.0"} {
		if got, err := NormalizeVersion(bad); err == nil {
			t.Errorf("NormalizeVersion(%q) = %q, want an error", bad, got)
		}
	}
}

// deployments returns the Deployments of a multi-document YAML file.
func deployments(t *testing.T, file string) []appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []appsv1.Deployment
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d.Kind == "Deployment" {
			out = append(out, d)
		}
	}
	return out
}

// A release of a stand-in binary (what Run builds is the binary; this
// checks the rest): the files, the manifests pinned to the digest the
// image archive holds, and SHA256SUMS true of every file.
func TestRunWritesAReleasePinnedToItsImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "nats-operator")
	if err := os.WriteFile(bin, []byte("stand-in for the controller's binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r, err := Run(context.Background(), Options{Version: "0.2.0", Root: filepath.Join("..", ".."), Out: out, Commit: "0123abc", Arch: "arm64", ControllerBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nats-operator-image-v0.2.0.tar", InstallFile, InstallNamespacedFile, SumsFile}
	if !slices.Equal(r.Files, want) {
		t.Fatalf("files %v, want %v", r.Files, want)
	}
	held, err := image.ArchiveDigest(filepath.Join(out, "nats-operator-image-v0.2.0.tar"))
	if err != nil {
		t.Fatal(err)
	}
	ref := "ghcr.io/nats-operator/nats-operator:v0.2.0@" + held.String()
	if r.Digest != held || r.Reference != ref || r.Version != "v0.2.0" {
		t.Fatalf("result %+v; want the reference %s of the digest the archive holds", r, ref)
	}
	for _, f := range []string{InstallFile, InstallNamespacedFile} {
		ds := deployments(t, filepath.Join(out, f))
		if len(ds) != 1 {
			t.Fatalf("%s has %d Deployments, want 1", f, len(ds))
		}
		c := ds[0].Spec.Template.Spec.Containers[0]
		if c.Image != ref || !slices.Contains(c.Args, "--job-image="+ref) {
			t.Errorf("%s: image %s args %q; want %s, and as --job-image", f, c.Image, c.Args, ref)
		}
		if f == InstallNamespacedFile && !slices.Contains(c.Args, "--namespace=nats") {
			t.Errorf("%s: args %q lack the namespaced install's --namespace=nats", f, c.Args)
		}
	}

	sums, err := os.ReadFile(filepath.Join(out, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not <hex>  <name>", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS says %s of %s, the file's is %x", sum, name, h)
		}
		listed = append(listed, name)
	}
	if !slices.IsSorted(listed) || len(listed) != len(want)-1 {
		t.Errorf("SHA256SUMS lists %v, want every other file, sorted", listed)
	}
}

func TestRunRefusesABadVersion(t *testing.T) {
	out := t.TempDir()
	if _, err := Run(context.Background(), Options{Version: "latest", Out: out}); err == nil || !strings.Contains(err.Error(), "x.y.z") {
		t.Fatalf("Run of version latest: %v, want an error asking for x.y.z", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("a refused release wrote %d files", len(entries))
	}
}

func writeKustomization(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(names, "\n- ") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: nats-operator
  namespace: nats-system
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
      - name: nats-operator
        image: ghcr.io/nats-operator/nats-operator:v0.1.0
        args: [--workers=2]
`

func TestRenderPinsTheControllerAndItsJobs(t *testing.T) {
	const ref = "ghcr.io/nats-operator/nats-operator:v0.2.0@sha256:0123"
	// Without --job-image the Jobs would run the built-in default: it is
	// added.
	y, err := Render(writeKustomization(t, map[string]string{"d.yaml": deployment}), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "image: "+ref+"\n") || !strings.Contains(string(y), "- --job-image="+ref+"\n") || !strings.Contains(string(y), "- --workers=2\n") {
		t.Errorf("rendered:\n%s\nwant the image and --job-image pinned, the other args kept", y)
	}

	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no controller Deployment", map[string]string{"d.yaml": strings.Replace(deployment, "name: nats-operator\n  namespace", "name: other\n  namespace", 1)}, "no container"},
		{"the image named elsewhere, unpinned", map[string]string{"d.yaml": deployment, "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {image: ghcr.io/nats-operator/nats-operator:v0.1.0}\n"}, "appears 3 times"},
	} {
		if _, err := Render(writeKustomization(t, tt.files), ref); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Render = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}
