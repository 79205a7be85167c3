package controller

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/internal/pki"
)

// Of a CA, only the PEM CERTIFICATE blocks that parse as certificates are
// kept: a key, another block, text around them and a block's headers are
// dropped; a CA that is certificates only is kept byte for byte (CRLF and
// all), so its digest does not change; nothing is kept of one without a
// certificate.
func TestPEMCertificatesKeepOnlyTheCertificates(t *testing.T) {
	now := time.Now()
	a, err := pki.NewCA("a", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.NewCA("b", now)
	if err != nil {
		t.Fatal(err)
	}
	crlf := []byte(strings.ReplaceAll(string(a.Cert), "\n", "\r\n"))
	withHeader := []byte(strings.Replace(string(b.Cert), "-----BEGIN CERTIFICATE-----\n", "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\n", 1))
	bogus := []byte("-----BEGIN CERTIFICATE-----\nMIIBdTCCARugAwIBAgIQ\n-----END CERTIFICATE-----\n")
	for _, tc := range []struct {
		name string
		in   []byte
		want []byte
		n    int
	}{
		{"one certificate", a.Cert, a.Cert, 1},
		{"two, with blank lines", slices.Concat(a.Cert, []byte("\n\n"), b.Cert, []byte("\n")), slices.Concat(a.Cert, []byte("\n\n"), b.Cert, []byte("\n")), 2},
		{"CRLF line ends", crlf, crlf, 1},
		{"a certificate and its key", slices.Concat(a.Cert, a.Key), a.Cert, 1},
		{"the key first", slices.Concat(a.Key, a.Cert, b.Cert), slices.Concat(a.Cert, b.Cert), 2},
		{"text before", slices.Concat([]byte("subject=CN = a\nissuer=CN = a\n"), a.Cert), a.Cert, 1},
		{"text after", slices.Concat(a.Cert, []byte("password=hunter2\n")), a.Cert, 1},
		{"headers", withHeader, b.Cert, 1},
		{"a block that is no certificate", slices.Concat(bogus, a.Cert), a.Cert, 1},
		{"a key alone", a.Key, nil, 0},
		{"no PEM at all", []byte("hunter2"), nil, 0},
		{"nothing", nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n := pemCertificates(tc.in)
			if n != tc.n || !bytes.Equal(got, tc.want) {
				t.Errorf("got %d certificates %q, want %d %q", n, got, tc.n, tc.want)
			}
			if bytes.Contains(got, []byte("KEY")) || bytes.Contains(got, []byte("hunter2")) {
				t.Errorf("kept what is no certificate: %q", got)
			}
		})
	}
}
