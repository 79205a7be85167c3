package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Lifetimes. A certificate is renewed once less than a third of its
// lifetime is left (Renew), well before it expires.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 90 * 24 * time.Hour
)

// Pair is a PEM certificate and its PEM (PKCS#8) private key.
type Pair struct {
	Cert, Key []byte
}

// NewCA makes a self-signed CA named cn, valid from now for CALifetime.
func NewCA(cn string, now time.Time) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, err
	}
	return encode(der, key)
}

// Issue makes a certificate for dnsNames under ca, valid from now for
// CertLifetime, for server and client authentication.
func Issue(ca Pair, cn string, dnsNames []string, now time.Time) (Pair, error) {
	return issue(ca, cn, dnsNames, nil, now)
}

func issue(ca Pair, cn string, dnsNames []string, ips []net.IP, now time.Time) (Pair, error) {
	caCert, caKey, err := parse(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(CertLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, err
	}
	return encode(der, key)
}

// IssueForIPs is Issue for IP addresses (tests that dial loopback
// addresses).
func IssueForIPs(ca Pair, cn string, ips []net.IP, now time.Time) (Pair, error) {
	return issue(ca, cn, nil, ips, now)
}

// Check says why cert (PEM) is not a usable certificate for dnsNames under
// the CA at now, or that it needs renewing (Renew); nil when it is good.
func Check(cert, caCert []byte, dnsNames []string, now time.Time) error {
	c, err := parseCert(cert)
	if err != nil {
		return err
	}
	ca, err := parseCert(caCert)
	if err != nil {
		return fmt.Errorf("the CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for i, name := range dnsNames {
		var err error
		if i == 0 {
			_, err = c.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
		} else {
			// Verify checks the name (VerifyHostname) and then builds the
			// chain, which does not depend on the name: built once, for the
			// first. Each build checks a signature, and the controller
			// checks the route certificate on every sync (17% of its CPU in
			// a 100-cluster version change, with the chain built per name).
			err = c.VerifyHostname(name)
		}
		if err != nil {
			return fmt.Errorf("not valid for %s: %w", name, err)
		}
	}
	if Renew(c, now) {
		return ErrRenew
	}
	return nil
}

// ErrRenew says a certificate is good but has less than a third of its
// lifetime left.
var ErrRenew = errors.New("less than a third of its lifetime is left")

// Renew says whether c has less than a third of its lifetime left at now.
func Renew(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) < life/3
}

// NotAfter is when a PEM certificate expires.
func NotAfter(cert []byte) (time.Time, error) {
	c, err := parseCert(cert)
	if err != nil {
		return time.Time{}, err
	}
	return c.NotAfter, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}),
	}, nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parse(p Pair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	c, err := parseCert(p.Cert)
	if err != nil {
		return nil, nil, err
	}
	b, _ := pem.Decode(p.Key)
	if b == nil {
		return nil, nil, errors.New("no PEM private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("the private key is not ECDSA")
	}
	return c, ek, nil
}
