package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// spyLimiter is the controller's client-side rate limiter: it counts what
// asks it.
type spyLimiter struct{ used atomic.Int32 }

func (l *spyLimiter) TryAccept() bool                { l.used.Add(1); return true }
func (l *spyLimiter) Accept()                        { l.used.Add(1) }
func (l *spyLimiter) Stop()                          {}
func (l *spyLimiter) QPS() float32                   { return 50 }
func (l *spyLimiter) Wait(ctx context.Context) error { l.used.Add(1); return nil }

var _ flowcontrol.RateLimiter = (*spyLimiter)(nil)

// The reviews of /metrics go through a client of their own, made from the
// controller's config: its own rate limiter (20/s, burst 40), never the
// controller's (which leader election and every step share), and a user
// agent that names them. At most 8 are in flight: with 8 TokenReviews
// waiting on the API server, another made-up token is answered 429 at once
// and never reaches it.
func TestMetricsReviewsHaveTheirOwnClientAndABound(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	var inFlight, reviews atomic.Int32
	agents := make(chan string, 100)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		reviews.Add(1)
		agents <- r.UserAgent()
		inFlight.Add(1)
		defer inFlight.Add(-1)
		<-gate
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","status":{"authenticated":false,"error":"invalid bearer token"}}`)
	}))
	t.Cleanup(api.Close)

	controllerLimiter := &spyLimiter{}
	cfg := &rest.Config{Host: api.URL, UserAgent: "nats-operator", QPS: 50, Burst: 100, RateLimiter: controllerLimiter}
	kube, err := reviewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l := kube.AuthenticationV1().RESTClient().GetRateLimiter(); l == controllerLimiter || l == nil || l.QPS() != reviewQPS {
		t.Errorf("the review client's rate limiter is %T at %v/s, want one of its own at %d/s", l, l.QPS(), reviewQPS)
	}
	s, err := metricsServer("127.0.0.1:0", true, "", cfg, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}

	send := func(token string) <-chan int {
		code := make(chan int, 1)
		go func() {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			r.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			s.Handler.ServeHTTP(w, r)
			code <- w.Code
		}()
		return code
	}
	const bound = 8
	var held []<-chan int
	for i := range bound {
		held = append(held, send(fmt.Sprintf("made-up-%d", i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < bound {
		if time.Now().After(deadline) {
			t.Fatalf("%d TokenReviews in flight, want %d", inFlight.Load(), bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case code := <-send("made-up-extra"):
		if code != http.StatusTooManyRequests {
			t.Errorf("another token with %d reviews in flight: %d, want 429", bound, code)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("another token with %d reviews in flight was not answered at once", bound)
	}
	if n := reviews.Load(); n != bound {
		t.Errorf("%d TokenReviews reached the API server, want %d", n, bound)
	}
	release()
	for _, c := range held {
		if code := <-c; code != http.StatusUnauthorized {
			t.Errorf("a made-up token: %d, want 401", code)
		}
	}
	if code := <-send("made-up-extra"); code != http.StatusUnauthorized {
		t.Errorf("the extra token once the reviews ended: %d, want 401", code)
	}
	close(agents)
	for a := range agents {
		if !strings.HasSuffix(a, "/metrics-auth") {
			t.Errorf("a review's User-Agent is %q, want it to end in /metrics-auth", a)
		}
	}
	if n := controllerLimiter.used.Load(); n != 0 {
		t.Errorf("the reviews asked the controller's rate limiter %d times, want 0", n)
	}
}
