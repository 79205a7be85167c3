package localnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nats-operator/nats-operator/internal/image"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// A pod of an image of Options.ImageArchives runs from the image's own
// layer: the entrypoint's program as the archive holds it, with the
// container's args and env, its imageID the image's digest. A reference
// naming another digest is not pulled.
func TestPodsRunFromAnImageArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-operator")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"self=$0\"\necho \"args=$*\"\necho \"pod=$POD_NAME\"\n"), 0o755); err != nil {
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

	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	root := t.TempDir()
	node, err := localnode.New(env.Config, localnode.Options{Root: root, NodeName: "archive-node",
		ImageArchives: map[string]string{image.Repository: archive}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	client := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "archive"
	createNamespace(t, client, ns)
	pod := func(name, ref string) {
		t.Helper()
		_, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: ref, Args: []string{"backup", "--dir=/backup"},
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	pod("pinned", image.Reference("v0.0.1", digest))
	pod("other-digest", image.Repository+":v0.0.1@sha256:"+strings.Repeat("0", 64))

	poll.Eventually(t, time.Minute, 200*time.Millisecond, "the pinned pod to succeed", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "pinned", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s: %s", p.Status.Phase, describe(p))
		}
		if id := p.Status.ContainerStatuses[0].ImageID; id != image.Repository+"@"+digest.String() {
			t.Errorf("imageID %s, want %s@%s", id, image.Repository, digest)
		}
		return nil
	})
	b, _ := os.ReadFile(node.ContainerLogPath(ns, "pinned", "main"))
	self := filepath.Join(root, "images", "sha256-"+digest.Hex, "rootfs", "nats-operator")
	for _, want := range []string{"self=" + self + "\n", "args=backup --dir=/backup\n", "pod=pinned\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the container's log lacks %q:\n%s", want, b)
		}
	}

	poll.Eventually(t, time.Minute, 200*time.Millisecond, "the pod of another digest to fail its pull", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "other-digest", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return errors.New("not waiting: " + describe(p))
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w.Reason != "ErrImagePull" || !strings.Contains(w.Message, digest.String()) {
			return fmt.Errorf("waiting %s: %s; want ErrImagePull naming the archive's digest", w.Reason, w.Message)
		}
		return nil
	})
	t.Logf("ran %s from %s", image.Reference("v0.0.1", digest), self)
}
