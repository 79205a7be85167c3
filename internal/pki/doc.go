// Package pki makes the certificates the controller generates for route
// TLS: a CA (ECDSA P-256, self-signed) and, under it, a certificate for
// every server's DNS name usable for both server and client authentication
// (routes verify each other). It does no I/O and reads no clock: the caller
// passes the time.
package pki
