package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NatsOperatorTrust holds the trust roots a NatsCluster boots from in
// operator mode, given literally (signed elsewhere, e.g. with nsc): the NATS
// operator JWT and its system account JWT.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=nats
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NatsOperatorTrust struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the NATS operator JWT and the system account JWT.
	// +required
	Spec NatsOperatorTrustSpec `json:"spec"`
}

// NatsOperatorTrustSpec holds the trust roots.
type NatsOperatorTrustSpec struct {
	// operatorJWT is the NATS operator JWT the servers trust. The controller
	// checks that it decodes as an operator claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	OperatorJWT string `json:"operatorJWT"`

	// systemAccountJWT is the JWT of the system account. It must be issued by
	// the NATS operator's identity key or one of its signing keys, and be the
	// system account the operator JWT names, if it names one.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	SystemAccountJWT string `json:"systemAccountJWT"`

	// systemAccountSigningKey, optional, is a Secret key (in the same
	// namespace) holding the seed (SA...) of the system account's own key or
	// of one of its signing keys. With it the controller mints its own
	// short-lived users of the system account (see --system-user-lifetime)
	// for the $SYS requests of reloads, scale-down and replace, and
	// spec.auth.systemCredentials is not needed. Remove the key from the
	// system account JWT to revoke every user it issued.
	// +optional
	SystemAccountSigningKey *SecretKeySelector `json:"systemAccountSigningKey,omitempty"`
}

// SecretKeySelector selects a key of a Secret in the same namespace.
type SecretKeySelector struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key of the Secret holding the seed; "seed" when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// NatsOperatorTrustList is a list of NatsOperatorTrusts.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NatsOperatorTrustList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the NatsOperatorTrusts.
	Items []NatsOperatorTrust `json:"items"`
}

// NatsAccountTrust is an account that every server of the NatsClusters that
// reference it preloads.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=nats
// +kubebuilder:printcolumn:name="Public Key",type=string,JSONPath=`.spec.publicKey`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NatsAccountTrust struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the account's public key and JWT.
	// +required
	Spec NatsAccountTrustSpec `json:"spec"`
}

// NatsAccountTrustSpec is an account's public key and JWT.
type NatsAccountTrustSpec struct {
	// publicKey is the account's public nkey (A followed by 55 base32
	// characters).
	// +required
	// +kubebuilder:validation:XValidation:rule="self.matches('^A[A-Z2-7]{55}$')",message="must be an account public nkey: A followed by 55 characters of A-Z and 2-7"
	// +kubebuilder:validation:MaxLength=56
	PublicKey string `json:"publicKey"`

	// jwt is the account's JWT: its subject must be publicKey and its issuer
	// must be trusted by the cluster's NATS operator.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	JWT string `json:"jwt"`
}

// NatsAccountTrustList is a list of NatsAccountTrusts.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NatsAccountTrustList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the NatsAccountTrusts.
	Items []NatsAccountTrust `json:"items"`
}
