package main

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The metrics filter: 401 for a request the authenticator does not
// authenticate, 403 for a user the authorizer does not allow to get the
// request's path (asked as a non-resource URL), the handler for one it
// allows; the verb is the lower-case method.
func TestMetricsFilterAnswers401403And200(t *testing.T) {
	authn := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer reader":
			return &authenticator.Response{User: &user.DefaultInfo{Name: "reader"}}, true, nil
		case "Bearer nobody":
			return &authenticator.Response{User: &user.DefaultInfo{Name: "nobody"}}, true, nil
		}
		return nil, false, nil
	})
	var asked authorizer.Attributes
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = a
		if a.GetUser().GetName() == "reader" && a.GetVerb() == "get" && a.GetPath() == "/metrics" && !a.IsResourceRequest() {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no rule", nil
	})
	h := withAuthnAuthz(authn, authz, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("nats_operator_x 1\n"))
	}))
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"unknown", 401}, {"nobody", 403}, {"reader", 200}} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("token %q: %d, want %d (%s)", c.token, w.Code, c.want, w.Body)
		}
	}
	if asked == nil || asked.GetVerb() != "get" || asked.GetPath() != "/metrics" || asked.IsResourceRequest() {
		t.Errorf("the authorizer was asked %+v, want get on the non-resource URL /metrics", asked)
	}
}

// Without --metrics-cert-dir the certificate is self-signed, for
// localhost and the host name, and the same one is served until it needs
// renewing, then a new one under the same CA.
func TestMetricsSelfSignedCertificate(t *testing.T) {
	c := &servingCert{}
	now := time.Now()
	first, err := c.get(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Leaf.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	if again, _ := c.get(now.Add(time.Hour)); again != first {
		t.Error("a new certificate an hour later, want the same")
	}
	later := first.Leaf.NotAfter.Add(-time.Hour)
	renewed, err := c.get(later)
	if err != nil {
		t.Fatal(err)
	}
	if renewed == first {
		t.Fatal("the same certificate an hour before it expires, want a renewed one")
	}
	ca, err := x509.ParseCertificate(renewed.Certificate[1])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := renewed.Leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots, CurrentTime: later}); err != nil {
		t.Errorf("the renewed certificate does not verify under the CA it is served with: %v", err)
	}
}
