package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsMetricsAuth = framework.SharedNamespace("metrics-auth")

// The controller's /metrics is HTTPS and the API server decides who reads
// it (TokenReview, then SubjectAccessReview of get on /metrics), against
// the shared controller, which runs as the nats-operator ServiceAccount
// with manifests/rbac: no token is 401, a token the API server does not
// know is 401, a ServiceAccount's token without the right is 403, and a
// ServiceAccount bound to the shipped ClusterRole
// nats-operator-metrics-reader gets 200; with its token, a scrape as
// Prometheus makes it (Authorization: Bearer, the text format parsed by
// Prometheus' own parser) finds the nats_operator_* metrics. Plain HTTP is
// refused.
func TestMetricsNeedAReviewedToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsMetricsAuth)
	url := s.Controller.MetricsURL

	token := func(name string) string {
		t.Helper()
		if _, err := s.Kube.CoreV1().ServiceAccounts(s.NS).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := s.Kube.CoreV1().ServiceAccounts(s.NS).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	nobody, scraper := token("nobody"), token("prometheus")
	binding := "nats-operator-metrics-reader-" + s.NS
	if _, err := s.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nats-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: s.NS}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{})
	})

	// The shared controller may still be starting (another test's first
	// call started the stack): wait for it to answer at all.
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "the controller's /metrics to answer", func() error {
		_, _, err := framework.GetWithToken(url, "")
		return err
	})
	for _, c := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"ServiceAccount nobody (no role)", nobody, http.StatusForbidden},
		{"ServiceAccount prometheus (nats-operator-metrics-reader)", scraper, http.StatusOK},
	} {
		// The binding made just now reaches the API server's RBAC
		// authorizer through its informer: a 403 for the reader may come
		// first, and the controller caches a denial for 10 s.
		poll.Eventually(t, 30*time.Second, 500*time.Millisecond, c.who+" answered "+fmt.Sprint(c.want), func() error {
			code, body, err := framework.GetWithToken(url, c.token)
			if err != nil {
				return err
			}
			if code != c.want {
				return fmt.Errorf("%d %.200q", code, body)
			}
			return nil
		})
		t.Logf("%s: %d", c.who, c.want)
	}

	// Plain HTTP: the server speaks TLS only.
	if code, body, err := framework.Get(strings.Replace(url, "https://", "http://", 1)); err == nil && code == http.StatusOK {
		t.Errorf("/metrics over plain HTTP answered 200: %.200q", body)
	}

	// A scrape as Prometheus makes it, with the reader's token.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+scraper)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	resp, err := insecureClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	var ours []string
	for name := range families {
		if strings.HasPrefix(name, "nats_operator_") {
			ours = append(ours, name)
		}
	}
	if _, ok := families["nats_operator_step_duration_seconds"]; !ok {
		t.Errorf("the scrape has no nats_operator_step_duration_seconds; nats_operator_* families: %v", ours)
	}
	if _, ok := families["workqueue_depth"]; !ok {
		t.Errorf("the scrape has no workqueue_depth")
	}
	t.Logf("scraped %d metric families, %d of them nats_operator_*", len(families), len(ours))
}

// insecureClient scrapes as Prometheus with insecure_skip_verify: the
// controller's metrics certificate is self-signed.
func insecureClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the self-signed metrics certificate
	}}
}
