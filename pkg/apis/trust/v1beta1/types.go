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
