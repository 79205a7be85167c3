package v1beta1

// LeafNodesSpec makes the cluster a hub that accepts leaf connections, a
// leaf that connects to other clusters, or both.
//
// nats-server reloads the remotes a leaf connects to (added, removed, other
// URLs or credentials): the servers reconnect without a restart
// (measured on 2.15.1 and 2.15.2). Accepting
// leaf connections or no longer restarts the servers one at a time.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || (has(self.accept) && self.accept)",message="spec.leafnodes.tls is the TLS of the leaf listener: it needs accept",fieldPath=".tls"
type LeafNodesSpec struct {
	// accept makes every server listen for leaf connections on port 7422
	// ("leafnodes" on the pod and the Services). In operator mode a leaf
	// authenticates with the credentials of a user of an account the
	// servers trust, and lands in that account; without auth it lands in
	// the global account.
	// It needs spec.auth or insecure.
	// +optional
	Accept bool `json:"accept,omitempty"`

	// insecure accepts leaves without spec.auth, unauthenticated, into
	// the global account. Condition ListenersAuthenticated reports it.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// tls makes the leaf listener (accept) require TLS: every server
	// presents the routes' certificate (spec.routes.tls, which must not be
	// Disabled; the generated one is then also issued for
	// <name>-headless.<namespace>.svc, the name leaves dial). Leaves are
	// not asked for a certificate: they authenticate with credentials.
	// nats-server does not reload turning it on or off, so that restarts
	// the servers one at a time; leaves connected without TLS reconnect
	// and are refused until their remote has tls.
	// +optional
	TLS *LeafNodesTLS `json:"tls,omitempty"`

	// remotes are the clusters every server connects to as a leaf.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Remotes []LeafNodeRemote `json:"remotes,omitempty"`
}

// LeafNodesTLS is the TLS of the leaf listener.
type LeafNodesTLS struct{}

// LeafNodeRemote is a hub this cluster's servers connect to as a leaf: a
// NatsCluster of this Kubernetes cluster that accepts leaf connections
// (clusterRef) or leaf URLs.
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.urls)",message="a leaf remote names exactly one of clusterRef and urls"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || has(self.clusterRef) || has(self.tls.caSecret)",message="tls on a leaf remote by urls needs tls.caSecret, the CA the hub's certificate is verified against",fieldPath=".tls"
type LeafNodeRemote struct {
	// name identifies the remote (its credentials are mounted under it).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// clusterRef is a NatsCluster of this Kubernetes cluster with
	// spec.leafnodes.accept: its servers are reached at
	// nats://<name>-headless.<namespace>.svc:7422.
	// +optional
	ClusterRef *NatsClusterReference `json:"clusterRef,omitempty"`

	// urls are leaf URLs of the hub (nats://, tls://, nats-leaf://,
	// ws:// or wss:// host:port).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^(nats|tls|nats-leaf|ws|wss)://[^\s/?#]+:[0-9]{1,5}$`
	URLs []string `json:"urls,omitempty"`

	// credentials are the creds file (a user JWT and its seed) the servers
	// connect with, from a Secret of this namespace; absent, they connect
	// without credentials. The controller copies it into the Secret
	// <name>-leaf-credentials, which every server's config volume
	// projects, so adding or changing credentials reloads the servers
	// (for a cluster an earlier release made, the first credentials
	// restart them once, one at a time). A new creds file in the Secret
	// is used from the servers' next leaf connection on.
	// +optional
	Credentials *SecretKeySelector `json:"credentials,omitempty"`

	// tls connects over TLS, verifying the hub's certificate: against the
	// routes CA of the clusterRef NatsCluster (which needs
	// spec.leafnodes.tls), or the CAs of caSecret. The controller copies
	// the CA into <name>-leaf-credentials, so adding or changing it
	// reloads (nats-server reloads a remote's TLS).
	// +optional
	TLS *LeafRemoteTLS `json:"tls,omitempty"`

	// account is the local account the leaf connection binds (nats-server's
	// remote "account"): with auth, an account's public key; absent, the
	// global account without auth.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9$_-]+$`
	Account string `json:"account,omitempty"`
}

// LeafNodePort is the leaf port of every server with
// spec.leafnodes.accept.
const LeafNodePort = 7422

// LeafRemoteTLS is the TLS a leaf remote connects with.
type LeafRemoteTLS struct {
	// caSecret holds the PEM CA certificates the hub's certificate is
	// verified against, from a Secret of this namespace (key ca.crt unless
	// named): required for a remote by urls; for a clusterRef it replaces
	// the referenced cluster's routes CA.
	// +optional
	CASecret *CAKeySelector `json:"caSecret,omitempty"`
}
