package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/internal/apiauth"
	"github.com/nats-operator/nats-operator/internal/pki"
)

// Files of --metrics-cert-dir: a kubernetes.io/tls Secret's keys (a
// cert-manager Certificate's Secret mounted as a volume).
const (
	metricsCertFile = "tls.crt"
	metricsKeyFile  = "tls.key"
)

// The client-side rate limit of the /metrics reviews: a client of their
// own (reviewClient), so a flood of requests with made-up tokens waits on
// this limiter and never on the controller's, which leader election and
// every step share.
const (
	reviewQPS   = 20
	reviewBurst = 40
)

// reviewClient is the Kubernetes client of the /metrics reviews: cfg's
// server and credentials with a rate limiter of its own (reviewQPS,
// reviewBurst; a RateLimiter cfg carries is not shared).
func reviewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = reviewQPS, reviewBurst, nil
	if c.UserAgent != "" {
		c.UserAgent += "/metrics-auth"
	}
	return kubernetes.NewForConfig(c)
}

// metricsServer serves /metrics on addr. Secure (the default), it is
// HTTPS and each request is authenticated and authorized by the API
// server, as Kubernetes components delegate it (internal/apiauth): the
// bearer token by a TokenReview, then `get` on the non-resource URL
// /metrics by a SubjectAccessReview (the ClusterRole
// nats-operator-metrics-reader grants it). 401 without a valid token, 403
// without the right. Both answers are cached for a minute (a denial for 10
// s), so a scrape every 15 s costs the API server about one review of
// each a minute. The reviews go through a client of their own made from
// cfg (reviewClient), at most 8 at once: a request needing one more is
// answered 429 without an API call. The serving certificate is certDir's
// tls.crt and tls.key (re-read when they change), else a self-signed one
// made at start (renewed in memory before it expires).
func metricsServer(addr string, secure bool, certDir string, cfg *rest.Config, metrics http.Handler) (*http.Server, error) {
	mux := http.NewServeMux()
	s := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if !secure {
		mux.Handle("/metrics", metrics)
		return s, nil
	}
	kube, err := reviewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("the metrics review client: %w", err)
	}
	reviews := apiauth.New(kube.AuthenticationV1().TokenReviews(), kube.AuthorizationV1().SubjectAccessReviews(), apiauth.DefaultOptions())
	mux.Handle("/metrics", reviews.Filter(metrics))
	certs := &servingCert{dir: certDir}
	if _, err := certs.get(time.Now()); err != nil {
		return nil, fmt.Errorf("the metrics serving certificate: %w", err)
	}
	s.TLSConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return certs.get(time.Now())
		},
	}
	return s, nil
}

// servingCert is the metrics server's certificate: dir's files (re-read
// when their modification time changes), else a self-signed one.
type servingCert struct {
	dir string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	ca      pki.Pair
}

func (c *servingCert) get(now time.Time) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		return c.fromDir()
	}
	if c.cert != nil && !pki.Renew(c.cert.Leaf, now) {
		return c.cert, nil
	}
	if c.ca.Cert == nil {
		ca, err := pki.NewCA("nats-operator-metrics-ca", now)
		if err != nil {
			return nil, err
		}
		c.ca = ca
	}
	names := []string{"localhost"}
	if host, err := os.Hostname(); err == nil && host != "" {
		names = append(names, host)
	}
	pair, err := pki.Issue(c.ca, "nats-operator-metrics", names, now)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(append(pair.Cert, c.ca.Cert...), pair.Key)
	if err != nil {
		return nil, err
	}
	c.cert = &cert
	return c.cert, nil
}

func (c *servingCert) fromDir() (*tls.Certificate, error) {
	certFile, keyFile := filepath.Join(c.dir, metricsCertFile), filepath.Join(c.dir, metricsKeyFile)
	st, err := os.Stat(certFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // a Secret volume's files are swapped atomically; keep the last good one
		}
		return nil, err
	}
	if c.cert != nil && st.ModTime().Equal(c.modTime) {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, err
	}
	c.cert, c.modTime = &cert, st.ModTime()
	return c.cert, nil
}

// serve runs s until it is shut down: HTTPS when it has a TLS config.
func serve(ctx context.Context, s *http.Server) {
	var err error
	if s.TLSConfig != nil {
		err = s.ListenAndServeTLS("", "")
	} else {
		err = s.ListenAndServe()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.FromContext(ctx).Error(err, "Serving HTTP failed", "addr", s.Addr)
	}
}
