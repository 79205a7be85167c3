package main

import (
	"crypto/x509"
	"testing"
	"time"
)

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
