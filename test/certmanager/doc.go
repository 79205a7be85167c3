// Package certmanager proves that the real cert-manager controllers run on
// the local test bed (test/testenv, StartCertManager) and issue and renew a
// Certificate from a CA Issuer: the cert-manager path of the TLS tests.
package certmanager
