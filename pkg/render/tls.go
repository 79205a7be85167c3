package render

import (
	corev1 "k8s.io/api/core/v1"
)

// TLS files, projected into the config volume next to nats.conf so that a
// new certificate and the config that names it (with its digest in
// server_metadata) reach the server in one atomic update of the volume: the
// reload that applies the config then reads the new certificate too.
const (
	RoutesTLSDir  = "routes-tls"
	ClientTLSDir  = "client-tls"
	GatewayTLSDir = "gateway-tls"
	tlsCertFile   = "tls.crt"
	tlsKeyFile    = "tls.key"
	tlsCAFile     = "ca.crt"
	// TLSTimeout is the TLS handshake timeout in seconds, routes and clients.
	TLSTimeout = 2
)

// TLS is the TLS of the routes and of clients, as the controller resolved
// spec.routes.tls and spec.tls: nil for plain TCP.
type TLS struct {
	Routes *TLSFiles
	Client *TLSFiles
	// Gateway is the gateways' TLS under spec.gateway.tls: the routes'
	// certificate and key, and the CA bundle of the Secret
	// <name>-gateway-ca (CASecret, GatewayCASuffix); CADigest is the
	// bundle's digest.
	Gateway *TLSFiles
	// LeafCAs is a digest of the CAs of the leaf remotes with tls (in the
	// Secret <name>-leaf-credentials): another CA is a new config.
	LeafCAs string
}

// GatewayCASuffix names the Secret <name>-gateway-ca the controller keeps
// under spec.gateway.tls: the bundle of CAs the servers verify other
// clusters' gateways against, key ca.crt.
const GatewayCASuffix = "-gateway-ca"

// TLSFiles is a Secret holding a certificate, its key and a CA.
type TLSFiles struct {
	// Secret is the Secret's name.
	Secret string
	// CertKey, KeyKey and CAKey are its keys; CAKey is empty when the
	// Secret has no CA (client TLS only).
	CertKey, KeyKey, CAKey string
	// CASecret, when set, is the Secret CAKey is read from instead of
	// Secret: with spec.tls.verifyClients the controller's <name>-client-ca,
	// whose bundle is the CA of spec.tls and the CA of the controller's own
	// client certificate (ClientCASuffix).
	CASecret string
	// Digest is a digest of the Secret's certificate, key and CA: a new
	// certificate changes the config (server_metadata), and so the server's
	// revision, which a reload applies and the server then reports.
	Digest string
	// CADigest is a digest of the CA alone (routes): a new CA is no new
	// certificate under the same one, and cannot roll one server at a
	// time. Empty when unknown.
	CADigest string
	// Verify makes the server verify the peer's certificate against the CA
	// (always for routes; spec.tls.verifyClients for clients).
	Verify bool
}

type tlsConfig struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	CAFile   string `json:"ca_file,omitempty"`
	Verify   bool   `json:"verify,omitempty"`
	Timeout  int    `json:"timeout"`
}

// tlsBlock is the config block of f, its files under dir.
func tlsBlock(f *TLSFiles, dir string) *tlsConfig {
	if f == nil {
		return nil
	}
	c := &tlsConfig{
		CertFile: ConfigDir + "/" + dir + "/" + tlsCertFile,
		KeyFile:  ConfigDir + "/" + dir + "/" + tlsKeyFile,
		Verify:   f.Verify,
		Timeout:  TLSTimeout,
	}
	if f.CAKey != "" {
		c.CAFile = ConfigDir + "/" + dir + "/" + tlsCAFile
	}
	return c
}

// tlsProjection is the projected volume source of f's Secret under dir.
func tlsProjection(f *TLSFiles, dir string) corev1.VolumeProjection {
	items := []corev1.KeyToPath{
		{Key: f.CertKey, Path: dir + "/" + tlsCertFile},
		{Key: f.KeyKey, Path: dir + "/" + tlsKeyFile},
	}
	ca := corev1.KeyToPath{Key: f.CAKey, Path: dir + "/" + tlsCAFile}
	if f.CAKey != "" && f.CASecret == "" {
		items = append(items, ca)
	}
	return corev1.VolumeProjection{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: f.Secret},
		Items:                items,
	}}
}

// ClientCASuffix names the Secret <name>-client-ca the controller keeps
// under spec.tls.verifyClients: the CA of its own client certificate and
// that certificate, and the bundle the servers verify clients against.
const ClientCASuffix = "-client-ca"

// tlsProjections are the projected volume sources of f under dir: its
// Secret, and the Secret of its CA when that is another.
func tlsProjections(f *TLSFiles, dir string) []corev1.VolumeProjection {
	out := []corev1.VolumeProjection{tlsProjection(f, dir)}
	if f.CAKey != "" && f.CASecret != "" {
		out = append(out, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: f.CASecret},
			Items:                []corev1.KeyToPath{{Key: f.CAKey, Path: dir + "/" + tlsCAFile}},
		}})
	}
	return out
}

// configVolume is the config volume: the server's ConfigMap, and with TLS
// or leafCredentials a projected volume of the ConfigMap, the TLS Secrets
// and the Secret <cluster>-leaf-credentials (optional, all its keys). A
// cluster with neither keeps the ConfigMap volume of before, so its
// template is unchanged.
func configVolume(cluster, configMap string, tls TLS, leafCredentials bool) corev1.VolumeSource {
	if tls.Routes == nil && tls.Client == nil && tls.Gateway == nil && !leafCredentials {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
			DefaultMode:          ptr(corev1.ConfigMapVolumeSourceDefaultMode),
		}}
	}
	sources := []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
	}}}
	if tls.Routes != nil {
		sources = append(sources, tlsProjections(tls.Routes, RoutesTLSDir)...)
	}
	if tls.Client != nil {
		sources = append(sources, tlsProjections(tls.Client, ClientTLSDir)...)
	}
	if tls.Gateway != nil {
		sources = append(sources, tlsProjections(tls.Gateway, GatewayTLSDir)...)
	}
	if leafCredentials {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: LeafCredentialsSecretName(cluster)},
			Optional:             ptr(true),
		}})
	}
	return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources:     sources,
		DefaultMode: ptr(corev1.ProjectedVolumeSourceDefaultMode),
	}}
}
