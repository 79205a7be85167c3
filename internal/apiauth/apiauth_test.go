package apiauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// apiServer stands in for the API server's two reviews: token "reader"
// is user reader (in group readers, with an extra), "nobody" is nobody;
// reader may get /metrics. It counts the reviews and keeps the last
// SubjectAccessReview; fail makes the next review an error.
type apiServer struct {
	tokenReviews, accessReviews int
	lastAccess                  authorizationv1.SubjectAccessReviewSpec
	fail                        bool
}

func (a *apiServer) reviewer(now *time.Time) *Reviewer {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.tokenReviews++
		if a.fail {
			return true, nil, errors.New("the API server is away")
		}
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "reader":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "reader", UID: "u-1", Groups: []string{"readers"}, Extra: map[string]authenticationv1.ExtraValue{"scope": {"metrics"}}}}
		case "nobody":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "nobody"}}
		default:
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.accessReviews++
		if a.fail {
			return true, nil, errors.New("the API server is away")
		}
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		a.lastAccess = sar.Spec
		na := sar.Spec.NonResourceAttributes
		if sar.Spec.User == "reader" && sar.Spec.ResourceAttributes == nil && na != nil && na.Verb == "get" && na.Path == "/metrics" {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		return true, sar, nil
	})
	opts := DefaultOptions()
	opts.Now = func() time.Time { return *now }
	return New(kube.AuthenticationV1().TokenReviews(), kube.AuthorizationV1().SubjectAccessReviews(), opts)
}

func get(t *testing.T, h http.Handler, auth string) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// The filter: 401 without a bearer token or with one the API server does
// not authenticate, 403 for a user it does not allow to get the path
// (asked as a non-resource URL, with the user's name, UID, groups and
// extras), the handler for one it allows; the verb is the lower-case
// method, the scheme's case does not matter.
func TestTheFilterAnswers401403And200(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	api := &apiServer{}
	h := api.reviewer(&now).Filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("nats_operator_x 1\n"))
	}))
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Basic cmVhZGVy", 401}, {"Bearer ", 401}, {"Bearer unknown", 401}, {"Bearer nobody", 403}, {"Bearer reader", 200}, {"bearer reader", 200}} {
		if got := get(t, h, c.auth); got != c.want {
			t.Errorf("Authorization %q: %d, want %d", c.auth, got, c.want)
		}
	}
	sa := api.lastAccess
	if sa.User != "reader" || sa.UID != "u-1" || len(sa.Groups) != 1 || sa.Groups[0] != "readers" || len(sa.Extra["scope"]) != 1 ||
		sa.NonResourceAttributes == nil || sa.NonResourceAttributes.Verb != "get" || sa.NonResourceAttributes.Path != "/metrics" {
		t.Errorf("the API server was asked %+v, want reader's get on the non-resource URL /metrics", sa)
	}
}

// Answers are kept: a token's for a minute, authenticated or not; an
// allowance for a minute, a denial for 10 s; an error not at all. So a
// scrape every 15 s costs the API server one review of each a minute.
func TestAnswersAreKeptForTheirTime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	api := &apiServer{}
	h := api.reviewer(&now).Filter(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	step := func(d time.Duration, auth string, want, tokenReviews, accessReviews int) {
		t.Helper()
		now = now.Add(d)
		if got := get(t, h, auth); got != want {
			t.Errorf("%s at +%v: %d, want %d", auth, d, got, want)
		}
		if api.tokenReviews != tokenReviews || api.accessReviews != accessReviews {
			t.Errorf("%s at +%v: %d TokenReviews and %d SubjectAccessReviews so far, want %d and %d",
				auth, d, api.tokenReviews, api.accessReviews, tokenReviews, accessReviews)
		}
	}
	step(0, "Bearer reader", 200, 1, 1)
	step(15*time.Second, "Bearer reader", 200, 1, 1)
	step(15*time.Second, "Bearer reader", 200, 1, 1)
	step(31*time.Second, "Bearer reader", 200, 2, 2) // a minute on: both asked again

	step(0, "Bearer nobody", 403, 3, 3)
	step(9*time.Second, "Bearer nobody", 403, 3, 3)
	step(2*time.Second, "Bearer nobody", 403, 3, 4) // the denial expired, the token not

	step(0, "Bearer unknown", 401, 4, 4)
	step(30*time.Second, "Bearer unknown", 401, 4, 4) // not authenticated is kept too

	api.fail = true
	step(0, "Bearer other", 401, 5, 4)
	api.fail = false
	step(0, "Bearer other", 401, 6, 4) // the error was not kept

	api.fail = true
	now = now.Add(time.Minute) // every answer expired
	step(0, "Bearer reader", 401, 7, 4)
	api.fail = false
	step(0, "Bearer reader", 200, 8, 5)
}

// A cache takes no more than its bound: made-up tokens cannot grow it; a
// full one drops the expired entries to make room.
func TestTheCacheIsBounded(t *testing.T) {
	c := cache[bool]{max: 2, m: map[[32]byte]entry[bool]{}}
	t0 := time.Unix(1_800_000_000, 0)
	c.put([32]byte{1}, true, t0.Add(time.Second), t0)
	c.put([32]byte{2}, true, t0.Add(time.Minute), t0)
	c.put([32]byte{3}, true, t0.Add(time.Minute), t0)
	if _, ok := c.get([32]byte{3}, t0); ok || len(c.m) != 2 {
		t.Fatalf("a full cache took a third entry (%d entries)", len(c.m))
	}
	c.put([32]byte{2}, false, t0.Add(time.Minute), t0) // a key it has is replaced
	if v, ok := c.get([32]byte{2}, t0); !ok || v {
		t.Fatalf("entry 2 = %v, %v; want false, true", v, ok)
	}
	t1 := t0.Add(2 * time.Second) // entry 1 expired
	c.put([32]byte{3}, true, t1.Add(time.Minute), t1)
	if _, ok := c.get([32]byte{3}, t1); !ok || len(c.m) != 2 {
		t.Fatalf("a full cache with an expired entry did not make room (%d entries)", len(c.m))
	}
	if _, ok := c.get([32]byte{1}, t1); ok {
		t.Fatal("an expired entry was returned")
	}
}

// Two users who differ only in how their fields split ask different
// questions.
func TestAccessKeysDoNotCollide(t *testing.T) {
	a := accessKey(&User{Name: "ab", Groups: []string{"c"}}, "get", "/metrics")
	b := accessKey(&User{Name: "a", Groups: []string{"bc"}}, "get", "/metrics")
	c := accessKey(&User{Name: "ab", Groups: []string{"c"}}, "get", "/metricsx")
	d := accessKey(&User{Name: "ab", Groups: []string{"c"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}}, "get", "/metrics")
	if a == b || a == c || a == d {
		t.Fatal("different questions share a key")
	}
	if a != accessKey(&User{Name: "ab", Groups: []string{"c"}}, "get", "/metrics") {
		t.Fatal("the same question has two keys")
	}
}
