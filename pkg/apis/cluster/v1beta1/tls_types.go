package v1beta1

// RoutesSpec configures the routes between the servers.
type RoutesSpec struct {
	// tls secures the routes. When absent the servers keep what they run:
	// Generated for a new NatsCluster, and for one whose servers run route
	// TLS; Disabled for one whose servers run plain routes (one an earlier
	// release of the controller made, so an upgrade never turns route TLS
	// on). Turning route TLS on or off on a running cluster
	// cannot roll out one server at a time (a server with route TLS and one
	// without cannot route to each other): it is held, and the
	// cluster.nats-operator.io/restart-all annotation restarts every server
	// together, keeping JetStream's data.
	// +optional
	TLS *RouteTLS `json:"tls,omitempty"`
}

// RouteTLSMode is where the routes' certificate comes from.
// +kubebuilder:validation:Enum=Generated;Secret;Disabled
type RouteTLSMode string

const (
	// RouteTLSGenerated: the controller generates a CA and a certificate
	// for every server's DNS name (ECDSA P-256) in Secrets it owns, and
	// renews the certificate under the same CA well before it expires.
	RouteTLSGenerated RouteTLSMode = "Generated"
	// RouteTLSSecret: the certificate, key and CA of secret.
	RouteTLSSecret RouteTLSMode = "Secret"
	// RouteTLSDisabled: plain TCP routes.
	RouteTLSDisabled RouteTLSMode = "Disabled"
)

// RouteTLS is the TLS of the routes: verified on both sides against the CA.
// +kubebuilder:validation:XValidation:rule="self.mode == 'Secret' ? has(self.secret) : !has(self.secret)",message="secret is required with mode Secret and not allowed otherwise",fieldPath=".secret"
type RouteTLS struct {
	// mode is Generated (the default), Secret or Disabled.
	// +optional
	// +kubebuilder:default=Generated
	Mode RouteTLSMode `json:"mode,omitempty"`

	// secret holds the routes' certificate, valid for every server's DNS
	// name (<name>-<i>.<name>-headless.<namespace>.svc.cluster.local) for
	// both server and client authentication, its key and the CA.
	// +optional
	Secret *TLSSecretRef `json:"secret,omitempty"`
}

// ClientTLS is the TLS clients connect with: exactly one of secret and
// certificate.
// +kubebuilder:validation:XValidation:rule="has(self.secret) != has(self.certificate)",message="exactly one of secret and certificate must be set"
type ClientTLS struct {
	// secret holds the certificate (valid for the names clients use), its
	// key and, optionally, the CA clients' certificates are verified
	// against.
	// +optional
	Secret *TLSSecretRef `json:"secret,omitempty"`

	// certificate makes the controller create a cert-manager Certificate
	// for the client Service's names (<name>.<namespace>.svc and
	// <name>.<namespace>.svc.cluster.local), issued by issuerRef into the
	// Secret <name>-client-tls.
	// +optional
	Certificate *CertificateSource `json:"certificate,omitempty"`

	// verifyClients makes every client present a certificate signed by the
	// CA (secret's caKey, or the issuer's ca.crt).
	// +optional
	VerifyClients bool `json:"verifyClients,omitempty"`
}

// TLSSecretRef names a Secret in the NatsCluster's namespace holding a
// certificate, its key and a CA.
type TLSSecretRef struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// certKey is the key of the PEM certificate (chain), default tls.crt.
	// +optional
	// +kubebuilder:default=tls.crt
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	CertKey string `json:"certKey,omitempty"`

	// keyKey is the key of the PEM private key, default tls.key.
	// +optional
	// +kubebuilder:default=tls.key
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	KeyKey string `json:"keyKey,omitempty"`

	// caKey is the key of the PEM CA certificate, default ca.crt. For
	// client TLS it is optional in the Secret: without it no client
	// certificate can be verified.
	// +optional
	// +kubebuilder:default=ca.crt
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	CAKey string `json:"caKey,omitempty"`
}

// CertificateSource is a cert-manager Certificate the controller creates.
type CertificateSource struct {
	// issuerRef is the cert-manager issuer of the certificate.
	// +required
	IssuerRef IssuerRef `json:"issuerRef"`
}

// IssuerRef names a cert-manager Issuer or ClusterIssuer.
type IssuerRef struct {
	// name is the issuer's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind is Issuer (the default, in the NatsCluster's namespace) or
	// ClusterIssuer.
	// +optional
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	Kind string `json:"kind,omitempty"`

	// group is the issuer's API group, default cert-manager.io.
	// +optional
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
}
