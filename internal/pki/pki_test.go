package pki

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"
)

func TestIssuedCertificatesVerifyUnderTheirCAAndAreRenewedInTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("demo routes CA", now)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"*.demo-headless.nats.svc", "*.demo-headless.nats.svc.cluster.local"}
	leaf, err := Issue(ca, "demo routes", names, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(leaf.Cert, leaf.Key); err != nil {
		t.Fatalf("the issued pair does not load as a TLS key pair: %v", err)
	}
	if err := Check(leaf.Cert, ca.Cert, []string{"demo-0-0.demo-headless.nats.svc", "demo-7-0.demo-headless.nats.svc.cluster.local"}, now); err != nil {
		t.Errorf("fresh certificate: %v", err)
	}
	if err := Check(leaf.Cert, ca.Cert, []string{"demo-0-0.other-headless.nats.svc"}, now); err == nil {
		t.Error("a name outside the SANs verified")
	}
	other, _ := NewCA("other", now)
	if err := Check(leaf.Cert, other.Cert, []string{"demo-0-0.demo-headless.nats.svc"}, now); err == nil {
		t.Error("verified under another CA")
	}
	if err := Check(leaf.Cert, ca.Cert, nil, now.Add(61*24*time.Hour)); !errors.Is(err, ErrRenew) {
		t.Errorf("after 61 of 90 days: %v, want ErrRenew", err)
	}
	if err := Check(leaf.Cert, ca.Cert, nil, now.Add(59*24*time.Hour)); err != nil {
		t.Errorf("after 59 of 90 days: %v, want good", err)
	}
}
