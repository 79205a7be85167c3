package controller

// What the controller copies out of a Secret a NatsCluster names into a
// Secret of its own, which the servers' config volume projects: only what
// the servers need, checked to be what the field says it is. A leaf
// remote's credentials may name any key of any Secret of the namespace,
// and a CA any key of a Secret of this namespace or, through clusterRef, of
// the referenced NatsCluster's: copied unlooked-at, a database password or
// a CA's private key would land next to nats.conf. So a creds file must
// parse as one (render.CheckCredsFile: the controller imports no JWT
// library), and of a CA only its certificates are copied.

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
)

// pemCertificates is the PEM CERTIFICATE blocks of b that parse as X.509
// certificates, in their order, and their number: whatever else b holds (a
// private key, a block of another type, text around the blocks, a block's
// headers) is left out. b itself is returned when it holds nothing else
// but whitespace, so a CA that is only certificates is copied byte for
// byte (its digest, and so the servers' config, stay what they were). nil,
// 0 when b holds no certificate.
func pemCertificates(b []byte) ([]byte, int) {
	var out bytes.Buffer
	n, clean := 0, true
	for rest := b; ; {
		block, next := pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				clean = false
			}
			break
		}
		// What pem.Decode skipped before the block (text, a malformed
		// block) ends where the block's BEGIN line starts.
		consumed := rest[:len(rest)-len(next)]
		if i := bytes.LastIndex(consumed, []byte("-----BEGIN")); i < 0 || len(bytes.TrimSpace(consumed[:i])) > 0 {
			clean = false
		}
		rest = next
		if block.Type != "CERTIFICATE" {
			clean = false
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			clean = false
			continue
		}
		if len(block.Headers) > 0 {
			clean = false
		}
		n++
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})
	}
	switch {
	case n == 0:
		return nil, 0
	case clean:
		return b, n
	}
	return out.Bytes(), n
}
