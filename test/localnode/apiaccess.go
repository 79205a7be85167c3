package localnode

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/test/localnode/internal/podns"
)

// What a kubelet gives a pod to reach the API server with in-cluster
// config: KUBERNETES_SERVICE_HOST and _PORT (env.go), and the projected
// service-account volume the ServiceAccount admission plugin adds
// (kube-api-access-*: a token from the TokenRequest API, the
// kube-root-ca.crt ConfigMap, the namespace), mounted where client-go's
// rest.InClusterConfig reads it.

// apiAddress splits the API server URL of the node's config into the host
// and port a pod is given.
func apiAddress(host string) (string, string, error) {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("localnode: API server address %q: %v", host, err)
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		h, p = u.Host, "443"
		if u.Scheme == "http" {
			p = "80"
		}
	}
	return h, p, nil
}

// tokens caches the service-account tokens of a pod's projected volumes,
// one per audience and lifetime, renewed as the kubelet renews them: when
// 80% of the lifetime has passed (or after 24 hours).
type tokens struct {
	mu    sync.Mutex
	items map[string]token
}

type token struct {
	value          []byte
	issued, expiry time.Time
}

func (t token) fresh(now time.Time) bool {
	life := t.expiry.Sub(t.issued)
	if life > 24*time.Hour {
		life = 24 * time.Hour
	}
	return now.Before(t.issued.Add(life * 8 / 10))
}

// serviceAccountToken returns a token of the pod's service account bound to
// the pod, from the TokenRequest API, as the kubelet writes into a
// serviceAccountToken projection.
func (w *podWorker) serviceAccountToken(pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	key := fmt.Sprintf("%s|%s|%v", sa, p.Audience, p.ExpirationSeconds)
	now := time.Now()
	w.tokens.mu.Lock()
	defer w.tokens.mu.Unlock()
	if t, ok := w.tokens.items[key]; ok && t.fresh(now) {
		return t.value, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := w.n.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		// As the kubelet's FailedMount: the pod waits in ContainerCreating.
		return nil, errNotReady{fmt.Sprintf("failed to fetch token: %v", err)}
	}
	if w.tokens.items == nil {
		w.tokens.items = map[string]token{}
	}
	t := token{value: []byte(res.Status.Token), issued: now, expiry: res.Status.ExpirationTimestamp.Time}
	w.tokens.items[key] = t
	return t.value, nil
}

// wellKnownDirs are the mount paths programs read by convention rather
// than by an argument the node could rewrite: they are bind-mounted at
// their path in the container's mount namespace.
var wellKnownDirs = []string{"/var/run/secrets/", "/run/secrets/"}

// wellKnownMounts returns the bind mounts of c's volume mounts under a
// well-known directory. Their mount points are created on the machine as
// empty directories (there is no container root filesystem to make them
// in); what is mounted there is seen only inside the container.
func (w *podWorker) wellKnownMounts(pod *corev1.Pod, c *corev1.Container) ([]podns.Mount, error) {
	var ms []podns.Mount
	for target, source := range w.mounts(pod, c) {
		known := false
		for _, d := range wellKnownDirs {
			known = known || strings.HasPrefix(target+"/", d)
		}
		if !known {
			continue
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return nil, fmt.Errorf("mount point %s: %w", target, err)
		}
		if err := os.MkdirAll(source, 0o755); err != nil {
			return nil, err
		}
		ms = append(ms, podns.Mount{Source: filepath.Clean(source), Target: target})
	}
	return ms, nil
}
