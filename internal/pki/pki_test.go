package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
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

// Check builds the chain once, with the first name, and checks the other
// names alone: a certificate valid for the first name and not for a later
// one is refused naming that one, and one under another CA is refused
// whatever the names.
func TestCheckRefusesEachNameAndTheChainOnce(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("demo routes CA", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := Issue(ca, "demo routes", []string{"*.demo-headless.nats.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	err = Check(leaf.Cert, ca.Cert, []string{"*.demo-headless.nats.svc", "*.demo-headless.nats.svc.cluster.local"}, now)
	var host x509.HostnameError
	if err == nil || !errors.As(err, &host) || !strings.Contains(err.Error(), "not valid for *.demo-headless.nats.svc.cluster.local") {
		t.Errorf("second name missing from the certificate: %v, want a HostnameError naming it", err)
	}
	other, _ := NewCA("other", now)
	err = Check(leaf.Cert, other.Cert, []string{"*.demo-headless.nats.svc", "*.demo-headless.nats.svc"}, now)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("under another CA: %v, want UnknownAuthorityError", err)
	}
	if err := Check(leaf.Cert, ca.Cert, []string{"*.demo-headless.nats.svc"}, now.Add(100*24*time.Hour)); err == nil || errors.Is(err, ErrRenew) {
		t.Errorf("expired: %v, want refused", err)
	}
}

func BenchmarkCheckRouteCertificate(b *testing.B) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ca, _ := NewCA("demo routes CA", now)
	names := []string{"*.demo-headless.nats.svc", "*.demo-headless.nats.svc.cluster.local", "demo-headless.nats.svc", "demo-headless.nats.svc.cluster.local"}
	leaf, _ := Issue(ca, "demo routes", names, now)
	for b.Loop() {
		if err := Check(leaf.Cert, ca.Cert, names[:2], now); err != nil {
			b.Fatal(err)
		}
	}
}
