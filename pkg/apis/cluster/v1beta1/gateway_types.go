package v1beta1

// GatewaySpec joins the cluster to a supercluster: its servers listen for
// gateway connections on port 7222 and connect to every remote.
//
// nats-server reloads no gateway field but its TLS settings (another CA
// bundle reloads), so every other change restarts the servers; which
// changes roll one server at a time, and which would split the
// supercluster mid-way and are held, the README's change table says.
// Adding the gateway to a running cluster with JetStream, or removing it,
// is held with OwnMetaGroup: the cluster's JetStream meta group and the
// supercluster's would be two.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.insecure) || !self.insecure",message="insecure (no gateway TLS) contradicts tls",fieldPath=".insecure"
// +kubebuilder:validation:XValidation:rule="has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)",message="spec.gateway.name cannot be changed: it is the cluster's name in the supercluster (nats-server's cluster.name), which every stream placement and every other cluster's remote names",fieldPath=".name"
type GatewaySpec struct {
	// name is the gateway's name, which nats-server makes the cluster's name
	// too (cluster.name): what other clusters' remotes name and streams are
	// placed by (placement.cluster). Default the NatsCluster's name. Every
	// cluster of a supercluster needs its own. It cannot change.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_-]*$`
	Name string `json:"name,omitempty"`

	// remotes are the other clusters of the supercluster this one connects
	// to. A cluster also accepts connections from clusters it does not
	// list (unless rejectUnknownCluster), and learns of every cluster of
	// the supercluster from the ones it reaches, so one remote that is up
	// is enough to join; each cluster listing every other is the
	// robust setup.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Remotes []GatewayRemote `json:"remotes,omitempty"`

	// advertise is the host:port other clusters connect to instead of the
	// server's pod address (a load balancer or node port in front of the
	// servers, for clusters in other Kubernetes clusters).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+:[0-9]{1,5}$`
	Advertise string `json:"advertise,omitempty"`

	// rejectUnknownCluster refuses gateway connections from clusters that
	// are not among remotes.
	// +optional
	RejectUnknownCluster bool `json:"rejectUnknownCluster,omitempty"`

	// tls secures the gateway connections, verified on both sides: it is
	// also how clusters authenticate each other (a server accepts and
	// dials only servers whose certificate chains to a CA of its bundle;
	// there is no gateway password, which nats-server would send in clear
	// text on every connection it makes). Turning
	// it on or off on a running cluster splits the supercluster one server
	// at a time (a server with gateway TLS and one without cannot connect):
	// it is held with GatewayChangeBlocked, like adding the gateway.
	// Absent, the gateway runs with TLS all the same, unless insecure.
	// +optional
	TLS *GatewayTLS `json:"tls,omitempty"`

	// insecure runs the gateway without TLS, unauthenticated: any pod
	// reaching port 7222 can join as a gateway and read and publish every
	// account's messages. Condition ListenersAuthenticated reports it.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// TLSOn says whether the gateway runs with TLS: unless insecure.
func (g *GatewaySpec) TLSOn() bool { return g != nil && (g.TLS != nil || !g.Insecure) }

// GatewayTLS is the TLS of the gateway connections. Every server presents
// the routes' certificate (spec.routes.tls, which must not be Disabled):
// the generated one is then also issued for <name>-headless.<namespace>.svc
// and .svc.cluster.local, the names other clusters dial; a certificate of
// spec.routes.tls.secret must carry them too. Each server verifies the
// other clusters' servers against a bundle the controller keeps in the
// Secret <name>-gateway-ca: this cluster's routes CA, the routes CA of
// every remote named by clusterRef (read from that NatsCluster), and the
// CAs of caSecret. A change of the bundle is applied by config reload.
// Each cluster of the supercluster should list the others as remotes:
// servers learn the others' addresses as IPs, and verify them under the
// name of the remote they dialled.
type GatewayTLS struct {
	// caSecret holds more PEM CA certificates other clusters' servers are
	// verified against: those of remotes by urls (clusters in other
	// Kubernetes clusters), from a Secret of this namespace; key ca.crt
	// unless named.
	// +optional
	CASecret *CAKeySelector `json:"caSecret,omitempty"`
}

// CAKeySelector selects a key of a Secret in the same namespace that holds
// PEM CA certificates.
type CAKeySelector struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key within the Secret, default ca.crt.
	// +optional
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// GatewayRemote is another cluster of the supercluster: a NatsCluster of
// this Kubernetes cluster (clusterRef) or gateway URLs.
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.urls)",message="a gateway remote names exactly one of clusterRef and urls"
type GatewayRemote struct {
	// name is the remote cluster's gateway name (its spec.gateway.name, by
	// default its NatsCluster's name): a server refuses a connection whose
	// gateway name is not the one it dialled.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_-]*$`
	Name string `json:"name"`

	// clusterRef is a NatsCluster of this Kubernetes cluster: its servers
	// are reached at nats://<name>-headless.<namespace>.svc.cluster.local:7222,
	// which resolves to every server it runs as it scales.
	// +optional
	ClusterRef *NatsClusterReference `json:"clusterRef,omitempty"`

	// urls are gateway URLs of the remote cluster's servers
	// (nats://host:port or tls://host:port); one that answers is enough,
	// it tells the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^(nats|tls)://[^\s/?#]+:[0-9]{1,5}$`
	URLs []string `json:"urls,omitempty"`
}

// NatsClusterReference names a NatsCluster, in this namespace unless
// namespace is set.
type NatsClusterReference struct {
	// name of the NatsCluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// namespace of the NatsCluster; default the referring NatsCluster's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// GatewayPort is the gateway port of every server.
const GatewayPort = 7222

// GatewayName is the gateway (and cluster) name of a NatsCluster with
// spec.gateway: spec.gateway.name, or the NatsCluster's name.
func (nc *NatsCluster) GatewayName() string {
	if g := nc.Spec.Gateway; g != nil && g.Name != "" {
		return g.Name
	}
	return nc.Name
}
