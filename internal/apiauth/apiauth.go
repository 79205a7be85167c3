package apiauth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
)

// Options are how long answers are kept and how long a review may take.
type Options struct {
	// AuthnTTL keeps a TokenReview's answer, authenticated or not.
	AuthnTTL time.Duration
	// AllowTTL and DenyTTL keep a SubjectAccessReview's answer.
	AllowTTL, DenyTTL time.Duration
	// Timeout bounds each review.
	Timeout time.Duration
	// MaxEntries bounds each cache: a full cache drops its expired
	// entries, then takes no more until some expire, so requests with
	// made-up tokens cannot grow it.
	MaxEntries int
	// MaxInFlight bounds the reviews in flight at once, TokenReviews and
	// SubjectAccessReviews together: a request whose answer is not cached
	// and that finds every slot taken gets ErrBusy (Filter: 429) at once,
	// without an API call. A request for a question already under review
	// waits for that review's answer and takes no slot. 0: no bound.
	MaxInFlight int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultOptions are a minute for a token and an allowance, 10 s for a
// denial (a role just bound is seen soon), 10 s a review, 4096 entries, 8
// reviews in flight.
func DefaultOptions() Options {
	return Options{AuthnTTL: time.Minute, AllowTTL: time.Minute, DenyTTL: 10 * time.Second, Timeout: 10 * time.Second, MaxEntries: 4096, MaxInFlight: 8}
}

// ErrBusy is returned, without an API call, when a review is needed and
// Options.MaxInFlight reviews are in flight already.
var ErrBusy = errors.New("too many reviews in flight")

// User is who the API server says a token belongs to.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authenticationv1.ExtraValue
}

// Reviewer asks the API server, through a cache.
type Reviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	opts   Options

	authn cache[*User] // nil: not authenticated
	authz cache[bool]

	// slots holds a token per review in flight (nil: no bound).
	slots chan struct{}
	// authnCalls and authzCalls are the reviews in flight, by key, so the
	// same question asked again meanwhile waits for its answer.
	authnCalls flight[*User]
	authzCalls flight[verdict]
}

// New returns a Reviewer that asks through these clients.
func New(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, opts Options) *Reviewer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Reviewer{tokens: tokens, access: access, opts: opts,
		authn:      cache[*User]{max: opts.MaxEntries, m: map[[32]byte]entry[*User]{}},
		authz:      cache[bool]{max: opts.MaxEntries, m: map[[32]byte]entry[bool]{}},
		authnCalls: flight[*User]{m: map[[32]byte]*call[*User]{}},
		authzCalls: flight[verdict]{m: map[[32]byte]*call[verdict]{}}}
	if opts.MaxInFlight > 0 {
		r.slots = make(chan struct{}, opts.MaxInFlight)
	}
	return r
}

// acquire takes a slot for one review, or says there is none free; release
// gives it back.
func (r *Reviewer) acquire() bool {
	if r.slots == nil {
		return true
	}
	select {
	case r.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (r *Reviewer) release() {
	if r.slots != nil {
		<-r.slots
	}
}

// reviewContext bounds one review by Options.Timeout, apart from the
// request that started it: the requests waiting for the same answer would
// otherwise fail when the first one's client goes away.
func (r *Reviewer) reviewContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
}

// Authenticate says whose token it is; nil without an error when the API
// server does not authenticate it. Errors are not cached; ErrBusy when a
// review is needed and none can start.
func (r *Reviewer) Authenticate(ctx context.Context, token string) (*User, error) {
	key := sha256.Sum256([]byte(token))
	if u, ok := r.authn.get(key, r.opts.Now()); ok {
		return u, nil
	}
	return r.authnCalls.do(ctx, key, func() (*User, error) {
		now := r.opts.Now()
		if u, ok := r.authn.get(key, now); ok { // answered just before this call began
			return u, nil
		}
		if !r.acquire() {
			return nil, ErrBusy
		}
		defer r.release()
		ctx, cancel := r.reviewContext(ctx)
		defer cancel()
		tr, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("TokenReview: %w", err)
		}
		var u *User
		if st := tr.Status; st.Authenticated && st.Error == "" {
			u = &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: st.User.Extra}
		}
		r.authn.put(key, u, now.Add(r.opts.AuthnTTL), now)
		return u, nil
	})
}

// verdict is a SubjectAccessReview's answer.
type verdict struct {
	allowed bool
	reason  string
}

// Authorize says whether u may verb the non-resource URL path, and the
// API server's reason when not. Errors are not cached; ErrBusy when a
// review is needed and none can start.
func (r *Reviewer) Authorize(ctx context.Context, u *User, verb, path string) (bool, string, error) {
	key := accessKey(u, verb, path)
	if allowed, ok := r.authz.get(key, r.opts.Now()); ok {
		return allowed, "cached", nil
	}
	a, err := r.authzCalls.do(ctx, key, func() (verdict, error) {
		now := r.opts.Now()
		if allowed, ok := r.authz.get(key, now); ok {
			return verdict{allowed: allowed, reason: "cached"}, nil
		}
		if !r.acquire() {
			return verdict{}, ErrBusy
		}
		defer r.release()
		a, err := r.subjectAccessReview(ctx, u, verb, path)
		if err != nil {
			return verdict{}, err
		}
		ttl := r.opts.DenyTTL
		if a.allowed {
			ttl = r.opts.AllowTTL
		}
		r.authz.put(key, a.allowed, now.Add(ttl), now)
		return a, nil
	})
	if err != nil {
		return false, "", err
	}
	return a.allowed, a.reason, nil
}

// subjectAccessReview asks the API server whether u may verb the
// non-resource URL path.
func (r *Reviewer) subjectAccessReview(ctx context.Context, u *User, verb, path string) (verdict, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := r.reviewContext(ctx)
	defer cancel()
	sar, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	reason := sar.Status.Reason
	if sar.Status.EvaluationError != "" {
		reason = strings.TrimSpace(reason + " " + sar.Status.EvaluationError)
	}
	return verdict{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: reason}, nil
}

// Filter lets a request through to next once its bearer token is
// authenticated (401 otherwise) and its user may do the request's method,
// lower-cased, on its path (403 otherwise; 500 when the review failed). A
// request that needs a review while Options.MaxInFlight are in flight is
// answered 429 Too Many Requests (Retry-After: 1) at once.
func (r *Reviewer) Filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		logger := klog.FromContext(req.Context()).WithValues("remote", req.RemoteAddr, "path", req.URL.Path)
		token, ok := bearer(req)
		if !ok {
			logger.V(4).Info("Request without a bearer token")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		busy := func(err error) bool {
			if !errors.Is(err, ErrBusy) {
				return false
			}
			logger.V(4).Info("Request refused: too many reviews in flight")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
			return true
		}
		u, err := r.Authenticate(req.Context(), token)
		if busy(err) {
			return
		}
		if err != nil || u == nil {
			logger.V(4).Info("Request not authenticated", "err", err)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, reason, err := r.Authorize(req.Context(), u, verb, req.URL.Path)
		if busy(err) {
			return
		}
		if err != nil {
			logger.Error(err, "Authorizing a request", "user", u.Name)
			http.Error(w, "authorization failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			logger.V(4).Info("Request denied: not authorized", "user", u.Name, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, path=%s)", u.Name, verb, req.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// bearer is the request's bearer token, as the API server reads it.
func bearer(req *http.Request) (string, bool) {
	auth := strings.TrimSpace(req.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// accessKey is a digest of who asks what: every field is length-prefixed,
// so no two different questions share a key.
func accessKey(u *User, verb, path string) [32]byte {
	h := sha256.New()
	write := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	write(u.Name)
	write(u.UID)
	write(fmt.Sprint(len(u.Groups)))
	for _, g := range u.Groups {
		write(g)
	}
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	write(fmt.Sprint(len(keys)))
	for _, k := range keys {
		write(k)
		write(fmt.Sprint(len(u.Extra[k])))
		for _, v := range u.Extra[k] {
			write(v)
		}
	}
	write(verb)
	write(path)
	var key [32]byte
	copy(key[:], h.Sum(nil))
	return key
}

// cache keeps answers until they expire, at most max of them.
type cache[T any] struct {
	mu  sync.Mutex
	max int
	m   map[[32]byte]entry[T]
}

type entry[T any] struct {
	v       T
	expires time.Time
}

func (c *cache[T]) get(k [32]byte, now time.Time) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		var zero T
		return zero, false
	}
	return e.v, true
}

func (c *cache[T]) put(k [32]byte, v T, expires, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for key, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, key)
			}
		}
		if len(c.m) >= c.max {
			return
		}
	}
	c.m[k] = entry[T]{v: v, expires: expires}
}

// flight runs one review per key at a time: a caller asking while the
// same review is in flight waits for its answer (or its own context).
type flight[T any] struct {
	mu sync.Mutex
	m  map[[32]byte]*call[T]
}

type call[T any] struct {
	done chan struct{}
	v    T
	err  error
}

func (f *flight[T]) do(ctx context.Context, k [32]byte, fn func() (T, error)) (T, error) {
	f.mu.Lock()
	if c, ok := f.m[k]; ok {
		f.mu.Unlock()
		select {
		case <-c.done:
			return c.v, c.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	c := &call[T]{done: make(chan struct{})}
	f.m[k] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.m, k)
		f.mu.Unlock()
		close(c.done)
	}()
	c.v, c.err = fn()
	return c.v, c.err
}
