package apiauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slowAPI answers reviews like apiServer (token "reader" may get
// /metrics, any other token is unknown) but holds every TokenReview until
// gate is closed, so a test can fill the slots. client-go's fake clientset
// cannot stand in: it runs its reactors under one lock, one review at a
// time.
type slowAPI struct {
	gate    chan struct{}
	entered chan string // each TokenReview's token, as it arrives

	tokenReviews, accessReviews atomic.Int32
}

func newSlowAPI() *slowAPI {
	return &slowAPI{gate: make(chan struct{}), entered: make(chan string, 1000)}
}

type slowTokens slowAPI

func (a *slowTokens) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	a.tokenReviews.Add(1)
	a.entered <- tr.Spec.Token
	select {
	case <-a.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := tr.DeepCopy()
	if tr.Spec.Token == "reader" {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "reader"}}
	} else {
		out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return out, nil
}

type slowAccess slowAPI

func (a *slowAccess) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	a.accessReviews.Add(1)
	out := sar.DeepCopy()
	out.Status.Allowed = sar.Spec.User == "reader"
	return out, nil
}

func (a *slowAPI) filter() http.Handler {
	opts := DefaultOptions()
	return New((*slowTokens)(a), (*slowAccess)(a), opts).Filter(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}

// waitEntered waits for n TokenReviews to arrive at the API server.
func (a *slowAPI) waitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-a.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("fewer than %d TokenReviews arrived (%d so far)", n, a.tokenReviews.Load())
		}
	}
}

// background sends a request with each token and returns the channel of
// their codes, one per token.
func background(h http.Handler, tokens ...string) <-chan int {
	codes := make(chan int, len(tokens))
	for _, tok := range tokens {
		go func() {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	return codes
}

// At most 8 reviews are in flight (DefaultOptions): with 8 TokenReviews
// of made-up tokens waiting on the API server, a ninth made-up token is
// answered 429 with Retry-After at once, without reaching the API server,
// while a token whose answers are cached is still served, and a request
// asking what is already being asked waits for that answer instead of
// taking a slot. Once the reviews end, a new token is reviewed again.
func TestReviewsInFlightAreBounded(t *testing.T) {
	api := newSlowAPI()
	h := api.filter()

	// Warm the reader's answers first.
	warm := background(h, "reader")
	api.waitEntered(t, 1)
	close(api.gate)
	if code := <-warm; code != http.StatusOK {
		t.Fatalf("the reader: %d, want 200", code)
	}
	api.gate = make(chan struct{}) // hold the next reviews (no review is in flight now)
	gate := api.gate
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate) // a failed test lets its reviews end
		}
	})

	var made []string
	for i := range DefaultOptions().MaxInFlight {
		made = append(made, fmt.Sprintf("made-up-%d", i))
	}
	held := background(h, made...)
	api.waitEntered(t, len(made))

	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.Header.Set("Authorization", "Bearer made-up-extra")
	w := httptest.NewRecorder()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		h.ServeHTTP(w, r)
	}()
	select {
	case <-answered:
	case <-time.After(2 * time.Second):
		t.Fatal("a ninth token with 8 reviews in flight was not answered at once: it waits on the API server")
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("a ninth token with 8 reviews in flight: %d (Retry-After %q), want 429 (Retry-After 1)", w.Code, w.Header().Get("Retry-After"))
	}
	if got := get(t, h, "Bearer reader"); got != http.StatusOK {
		t.Errorf("the reader, cached, while the slots are full: %d, want 200", got)
	}
	again := background(h, made[0], made[0], made[0]) // the same questions as one in flight
	time.Sleep(100 * time.Millisecond)
	if n := api.tokenReviews.Load(); n != int32(1+len(made)) {
		t.Errorf("%d TokenReviews, want %d: the ninth token or a question already in flight reached the API server", n, 1+len(made))
	}

	close(api.gate)
	for range len(made) {
		if code := <-held; code != http.StatusUnauthorized {
			t.Errorf("a made-up token: %d, want 401", code)
		}
	}
	for range 3 {
		if code := <-again; code != http.StatusUnauthorized {
			t.Errorf("a made-up token asked while under review: %d, want 401 (its review's answer)", code)
		}
	}
	if got := get(t, h, "Bearer made-up-extra"); got != http.StatusUnauthorized {
		t.Errorf("the ninth token once the slots are free: %d, want 401", got)
	}
	if n := api.tokenReviews.Load(); n != int32(2+len(made)) {
		t.Errorf("%d TokenReviews, want %d", n, 2+len(made))
	}
}

// A flood of one made-up token costs one TokenReview: requests arriving
// while it is under review wait for its answer, those after it find the
// answer cached. None is refused for want of a slot.
func TestAFloodOfOneTokenCostsOneReview(t *testing.T) {
	api := newSlowAPI()
	h := api.filter()
	const n = 200
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = "flood"
	}
	codes := background(h, tokens...)
	api.waitEntered(t, 1)
	time.Sleep(100 * time.Millisecond) // the rest arrive and wait
	close(api.gate)
	for range n {
		if code := <-codes; code != http.StatusUnauthorized {
			t.Errorf("the flood's token: %d, want 401", code)
		}
	}
	for range n {
		if got := get(t, h, "Bearer flood"); got != http.StatusUnauthorized {
			t.Fatalf("the flood's token, later: %d, want 401", got)
		}
	}
	if got := api.tokenReviews.Load(); got != 1 {
		t.Errorf("%d TokenReviews for %d requests with one token, want 1", got, 2*n)
	}
	if got := api.accessReviews.Load(); got != 0 {
		t.Errorf("%d SubjectAccessReviews for a token the API server does not know, want 0", got)
	}
}
