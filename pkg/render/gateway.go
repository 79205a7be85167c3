package render

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// GatewayPort is the gateway port of every server with spec.gateway.
const GatewayPort int32 = clusterv1beta1.GatewayPort

// GatewayPortName is the name of the gateway port (container, Services).
const GatewayPortName = "gateway"

// gatewayConfig is nats.conf's gateway block. nats-server requires
// gateway.name to equal cluster.name, so render sets both.
type gatewayConfig struct {
	Name                 string          `json:"name"`
	Listen               string          `json:"listen"`
	Advertise            string          `json:"advertise,omitempty"`
	RejectUnknownCluster bool            `json:"reject_unknown_cluster,omitempty"`
	Gateways             []gatewayRemote `json:"gateways,omitempty"`
	TLS                  *tlsConfig      `json:"tls,omitempty"`
}

type gatewayRemote struct {
	Name string   `json:"name"`
	URLs []string `json:"urls"`
}

// GatewayURL is the gateway URL of a NatsCluster's servers through its
// headless Service, which resolves to every server it runs:
// "nats://west-headless.ns.svc:7222".
func GatewayURL(cluster, namespace string) string {
	return fmt.Sprintf("nats://%s.%s.svc:%d", HeadlessServiceName(cluster), namespace, GatewayPort)
}

// gatewayOf renders spec.gateway, or nil without it, with the TLS of
// tls.Gateway under spec.gateway.tls. A remote named like the cluster
// itself is a SpecError (nats-server would dial itself), and so is
// spec.gateway.tls without route TLS (the gateway presents the routes'
// certificate).
func gatewayOf(nc *clusterv1beta1.NatsCluster, tls TLS) (*gatewayConfig, error) {
	g := nc.Spec.Gateway
	if g == nil {
		return nil, nil
	}
	var gatewayTLS *tlsConfig
	if g.TLSOn() {
		switch {
		case tls.Routes == nil && g.TLS == nil:
			return nil, &SpecError{Field: "spec.gateway", Message: "runs with TLS, presenting the routes' certificate, and spec.routes.tls is Disabled: turn route TLS on, or set spec.gateway.insecure: true to run the gateway without TLS (and without authentication)"}
		case tls.Routes == nil:
			return nil, &SpecError{Field: "spec.gateway.tls", Message: "needs route TLS: every server presents the routes' certificate to the other clusters, and spec.routes.tls is Disabled"}
		case tls.Gateway == nil:
			return nil, errors.New("spec.gateway.tls is set but no gateway TLS files were given")
		}
		gatewayTLS = tlsBlock(tls.Gateway, GatewayTLSDir)
	}
	name := nc.GatewayName()
	out := &gatewayConfig{
		Name:                 name,
		Listen:               fmt.Sprintf("0.0.0.0:%d", GatewayPort),
		Advertise:            g.Advertise,
		RejectUnknownCluster: g.RejectUnknownCluster,
		TLS:                  gatewayTLS,
	}
	for i, r := range g.Remotes {
		field := fmt.Sprintf("spec.gateway.remotes[%d]", i)
		if r.Name == name {
			return nil, &SpecError{Field: field + ".name", Message: fmt.Sprintf("%q is this cluster's own gateway name: a remote is another cluster", r.Name)}
		}
		// validateStoredGateway made sure of exactly one of clusterRef
		// and urls.
		remote := gatewayRemote{Name: r.Name, URLs: r.URLs}
		if r.ClusterRef != nil {
			name, ns, err := otherCluster(nc, r.ClusterRef, field+".clusterRef")
			if err != nil {
				return nil, err
			}
			remote.URLs = []string{GatewayURL(name, ns)}
		}
		for _, u := range remote.URLs {
			if err := checkConfigString(field+".urls entry", u); err != nil {
				return nil, &SpecError{Field: field + ".urls", Message: err.Error()}
			}
		}
		out.Gateways = append(out.Gateways, remote)
	}
	return out, nil
}

// canonical is GatewayRemotes of the block: "west=nats://a:7222,nats://b:7222;
// advertise=gw.example.com:7222; reject_unknown_cluster" with the remotes
// sorted by name and each remote's URLs sorted (nats-server picks among
// them at random: their order is no fact).
func (g *gatewayConfig) canonical() string {
	remotes := slices.Clone(g.Gateways)
	slices.SortFunc(remotes, func(a, b gatewayRemote) int { return strings.Compare(a.Name, b.Name) })
	var parts []string
	for _, r := range remotes {
		parts = append(parts, r.Name+"="+strings.Join(slices.Sorted(slices.Values(r.URLs)), ","))
	}
	if g.Advertise != "" {
		parts = append(parts, "advertise="+g.Advertise)
	}
	if g.RejectUnknownCluster {
		parts = append(parts, "reject_unknown_cluster")
	}
	return strings.Join(parts, "; ")
}

// The CRD's patterns of spec.gateway, for a stored object that skipped
// them.
var (
	gatewayNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	gatewayURLRE  = regexp.MustCompile(`^(nats|tls)://[^\s/?#]+:[0-9]{1,5}$`)
	advertiseRE   = regexp.MustCompile(`^[A-Za-z0-9.-]+:[0-9]{1,5}$`)
)

// validateStoredGateway refuses what the CRD refuses of spec.gateway.
func validateStoredGateway(g *clusterv1beta1.GatewaySpec) error {
	if g == nil {
		return nil
	}
	if g.Name != "" && (len(g.Name) > 63 || !gatewayNameRE.MatchString(g.Name)) {
		return &SpecError{Field: "spec.gateway.name", Message: fmt.Sprintf("%q must be at most 63 letters, digits, '-' and '_', starting with a letter or digit", g.Name)}
	}
	if g.Advertise != "" && !advertiseRE.MatchString(g.Advertise) {
		return &SpecError{Field: "spec.gateway.advertise", Message: fmt.Sprintf("%q must be host:port", g.Advertise)}
	}
	if t := g.TLS; t != nil && t.CASecret != nil {
		if errs := validation.IsDNS1123Subdomain(t.CASecret.Name); len(errs) > 0 {
			return &SpecError{Field: "spec.gateway.tls.caSecret.name", Message: fmt.Sprintf("%q is no Secret name: %s", t.CASecret.Name, strings.Join(errs, "; "))}
		}
		if k := t.CASecret.Key; k != "" && (len(k) > 253 || !keyNameRE.MatchString(k)) {
			return &SpecError{Field: "spec.gateway.tls.caSecret.key", Message: fmt.Sprintf("%q is no Secret key", k)}
		}
	}
	if g.TLS != nil && g.Insecure {
		return &SpecError{Field: "spec.gateway.insecure", Message: "spec.gateway.insecure runs the gateway without TLS: it cannot be set with spec.gateway.tls"}
	}
	seen := map[string]bool{}
	for i, r := range g.Remotes {
		field := fmt.Sprintf("spec.gateway.remotes[%d]", i)
		switch {
		case len(r.Name) == 0 || len(r.Name) > 63 || !gatewayNameRE.MatchString(r.Name):
			return &SpecError{Field: field + ".name", Message: fmt.Sprintf("%q must be at most 63 letters, digits, '-' and '_', starting with a letter or digit", r.Name)}
		case seen[r.Name]:
			return &SpecError{Field: field, Message: fmt.Sprintf("a second remote named %q", r.Name)}
		case (r.ClusterRef != nil) == (len(r.URLs) > 0):
			return &SpecError{Field: field, Message: "a gateway remote names exactly one of clusterRef and urls"}
		}
		seen[r.Name] = true
		for j, u := range r.URLs {
			if !gatewayURLRE.MatchString(u) {
				return &SpecError{Field: fmt.Sprintf("%s.urls[%d]", field, j), Message: fmt.Sprintf("%q must be nats://host:port or tls://host:port", u)}
			}
		}
	}
	return nil
}

// otherCluster is the NatsCluster a clusterRef names (its namespace
// defaulting to nc's); a SpecError on field when it is nc itself.
func otherCluster(nc *clusterv1beta1.NatsCluster, ref *clusterv1beta1.NatsClusterReference, field string) (name, namespace string, err error) {
	namespace = ref.Namespace
	if namespace == "" {
		namespace = nc.Namespace
	}
	if namespace == nc.Namespace && ref.Name == nc.Name {
		return "", "", &SpecError{Field: field, Message: "names this NatsCluster itself: a remote is another cluster"}
	}
	return ref.Name, namespace, nil
}
