package render

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
	appsv1 "k8s.io/api/apps/v1"
)

// Facts are the facts of a server's config that decide whether a server on
// one config and a server on another can run side by side: what the planner
// classifies (rollout.Classify). The struct is identical to
// rollout.ConfigFacts, so the controller passes it on with a conversion, and
// a field added to one and not the other does not compile.
//
// Every field of the rendered nats.conf is either one of these facts or on
// the list of fields proven to roll one server at a time (configFields): a
// test fails for a field that is neither, so a new config block cannot be
// added without a decision.
type Facts struct {
	// Version is the nats-server version, e.g. 2.15.2 (the image tag).
	Version string
	// ClusterName is cluster.name.
	ClusterName string
	// Operator is the NATS operator's public key (O...); empty without auth.
	Operator string
	// SystemAccount is the system account's public key (A...); empty without
	// auth (the server then uses $SYS).
	SystemAccount string
	// Accounts are the preloaded accounts other than the system account
	// (accountTrustRefs), each its public key and a digest of its JWT
	// ("<key>@<digest>": an account whose claims changed under the same
	// key is another account to the planner), sorted.
	Accounts []string
	// Resolver is resolver.type (full, cache or mem); empty without auth.
	Resolver string
	// JetStream says whether JetStream is enabled.
	JetStream bool
	// JetStreamDomain is jetstream.domain.
	JetStreamDomain string
	// MaxMemoryStore and MaxFileStore are the JetStream limits in bytes; 0
	// when not set (the server picks its own).
	MaxMemoryStore int64
	MaxFileStore   int64
	// ServerTags are the server tags as key:value, sorted.
	ServerTags []string
	// SystemUser says whether the config has the controller's system user
	// (Input.SystemUser); always false with auth.
	SystemUser bool
	// SystemUserNKey says whether that user is an nkey user
	// (accounts.$SYS.users[0].nkey) rather than a password user.
	SystemUserNKey bool
	// RouteTLS says whether the routes are TLS (cluster.tls).
	RouteTLS bool
	// ClientTLS says whether clients connect over TLS (tls); ClientVerify
	// whether they must present a certificate (tls.verify).
	ClientTLS    bool
	ClientVerify bool
	// RoutesCertificate and ClientCertificate are digests of the TLS
	// Secrets (server_metadata): another one is a new certificate.
	RoutesCertificate string
	ClientCertificate string
	// RoutesCA is a digest of the route CA the server was given (the
	// AnnotationRoutesCA of its ConfigMap; TLSFiles.CADigest for the
	// target); empty when not known (a ConfigMap of an older release).
	RoutesCA string
	// LameDuckDuration and LameDuckGracePeriod are lame_duck_duration and
	// lame_duck_grace_period as the config holds them (30s, 10s).
	LameDuckDuration    string
	LameDuckGracePeriod string
	// Gateway says whether the config has a gateway block (spec.gateway).
	Gateway bool
	// GatewayRemotes is the rest of the gateway block, one canonical
	// string: each remote as name=url,url (sorted by name), the
	// advertise address and reject_unknown_cluster; empty without a
	// gateway.
	GatewayRemotes string
	// GatewayTLS says whether the gateway block has TLS
	// (spec.gateway.tls); GatewayCA is the digest of the CA bundle the
	// servers verify other clusters' gateways against (server_metadata);
	// both empty without a gateway.
	GatewayTLS bool
	GatewayCA  string
	// LeafnodesAccept says whether the servers accept leaf connections
	// (leafnodes.listen); LeafnodeRemotes are the remotes they connect to
	// as a leaf, one canonical string (each remote's URLs, credentials
	// file and account, sorted); empty without.
	LeafnodesAccept bool
	// LeafnodesTLS says whether the leaf listener requires TLS
	// (spec.leafnodes.tls).
	LeafnodesTLS    bool
	LeafnodeRemotes string
	// WebSocket is the websocket block in one canonical string (port,
	// TLS, origins, compression); empty without (spec.websocket).
	WebSocket string
	// MQTT is the mqtt block's listener (port, TLS); MQTTDelivery its
	// ack_wait and max_ack_pending; both empty without (spec.mqtt).
	MQTT         string
	MQTTDelivery string
	// MonitorTLS says whether the monitoring port serves HTTPS
	// (spec.monitoring.tls).
	MonitorTLS bool
}

// fieldRole says what the planner knows of one field of nats.conf: it is a
// fact (the Facts field it feeds), or it rolls one server at a time (why).
type fieldRole struct {
	fact  string
	rolls string
}

func fact(name string) fieldRole   { return fieldRole{fact: name} }
func rolls(why string) fieldRole   { return fieldRole{rolls: why} }
func (r fieldRole) isFact() bool   { return r.fact != "" }
func (r fieldRole) String() string { return cmp.Or(r.fact, "rolls: "+r.rolls) }

// configFields is the decision for every field of serverConfig, by its JSON
// path. A field that is not a fact must be one whose value is either the same
// on every config render produces, or differs in a way the route-
// compatibility matrix (pkg/rollout) runs side by side.
var configFields = map[string]fieldRole{
	"server_name":            rolls("differs per server by design and never changes for a server"),
	"listen":                 rolls("a constant (0.0.0.0:4222)"),
	"http":                   fact("MonitorTLS"),
	"https":                  fact("MonitorTLS"),
	"pid_file":               rolls("a constant path"),
	"lame_duck_duration":     fact("LameDuckDuration"),
	"lame_duck_grace_period": fact("LameDuckGracePeriod"),
	"cluster":                rolls("present unless one server with JetStream runs standalone, which its ClusterName (empty) says"),
	"cluster.name":           fact("ClusterName"),
	"cluster.listen":         rolls("a constant (0.0.0.0:6222)"),
	"cluster.routes": rolls("one route per seed server (the first SeedServers) and per server before this one; servers with more or fewer routes route to each other, " +
		"as every matrix case with servers on two specs shows (solicited routes are matched by server name) and TestScaleUpRouteGossip shows for added servers"),
	"jetstream":                          fact("JetStream"),
	"jetstream.store_dir":                rolls("a constant path"),
	"jetstream.max_memory_store":         fact("MaxMemoryStore"),
	"jetstream.max_file_store":           fact("MaxFileStore"),
	"jetstream.domain":                   fact("JetStreamDomain"),
	"server_tags":                        fact("ServerTags"),
	"operator":                           fact("Operator"),
	"system_account":                     fact("SystemAccount"),
	"resolver":                           fact("Resolver"),
	"resolver.type":                      fact("Resolver"),
	"resolver.dir":                       rolls("a constant path (absent with the mem resolver)"),
	"resolver.allow_delete":              rolls("follows resolver.type (full: false; cache: absent)"),
	"resolver.interval":                  rolls("follows resolver.type (full: 2m; cache: absent)"),
	"resolver_preload":                   fact("Accounts"),
	"server_metadata":                    rolls("always present"),
	"server_metadata.config_revision":    rolls("the revision: what the server reports; differs on every change by design"),
	"server_metadata.routes_certificate": fact("RoutesCertificate"),
	"server_metadata.client_certificate": fact("ClientCertificate"),
	"server_metadata.gateway_ca":         fact("GatewayCA"),
	"server_metadata.leaf_cas":           fact("LeafnodeRemotes"),
	"tls":                                fact("ClientTLS"),
	"tls.cert_file":                      rolls("a constant path"),
	"tls.key_file":                       rolls("a constant path"),
	"tls.ca_file":                        rolls("present when the Secret has a CA: used only to verify clients (tls.verify)"),
	"tls.verify":                         fact("ClientVerify"),
	"tls.timeout":                        rolls("a constant"),
	"cluster.tls":                        fact("RouteTLS"),
	"cluster.tls.cert_file":              rolls("a constant path"),
	"cluster.tls.key_file":               rolls("a constant path"),
	"cluster.tls.ca_file":                rolls("a constant path: routes always have a CA"),
	"cluster.tls.verify":                 rolls("always true: routes verify each other"),
	"cluster.tls.timeout":                rolls("a constant"),
	"accounts":                           fact("SystemUser"),
	"accounts.$SYS":                      rolls("always present in the accounts block"),
	// The controller's one system user: an nkey user (its public key) or a
	// password user (a constant name, and a password hash that changes only
	// when the controller rotates the password; servers with either hash
	// route and keep one meta group, as the matrix case "new system user
	// password" shows: users are local to a server). Which of the two it
	// is, is the fact.
	"accounts.$SYS.users":            fact("SystemUserNKey"),
	"gateway":                        fact("Gateway"),
	"gateway.name":                   rolls("always cluster.name, which nats-server requires it to equal: another name is ClusterName"),
	"gateway.listen":                 rolls("a constant (0.0.0.0:7222)"),
	"gateway.advertise":              fact("GatewayRemotes"),
	"gateway.reject_unknown_cluster": fact("GatewayRemotes"),
	"gateway.gateways":               fact("GatewayRemotes"),
	"gateway.tls":                    fact("GatewayTLS"),
	"gateway.tls.cert_file":          rolls("a constant path"),
	"gateway.tls.key_file":           rolls("a constant path"),
	"gateway.tls.ca_file":            rolls("a constant path: the bundle's content is GatewayCA"),
	"gateway.tls.verify":             rolls("always true: gateways verify each other"),
	"gateway.tls.timeout":            rolls("a constant"),
	"leafnodes":                      rolls("present when leafnodes.listen or leafnodes.remotes is, which are the facts"),
	"leafnodes.listen":               fact("LeafnodesAccept"),
	"leafnodes.remotes":              fact("LeafnodeRemotes"),
	"leafnodes.tls":                  fact("LeafnodesTLS"),
	"leafnodes.tls.cert_file":        rolls("a constant path (the routes' certificate)"),
	"leafnodes.tls.key_file":         rolls("a constant path"),
	"leafnodes.tls.timeout":          rolls("a constant"),
	"leafnodes.tls.ca_file":          rolls("never rendered: leaves are not asked for a certificate"),
	"leafnodes.tls.verify":           rolls("never rendered: leaves are not asked for a certificate"),
	"websocket":                      fact("WebSocket"),
	"websocket.port":                 fact("WebSocket"),
	"websocket.no_tls":               fact("WebSocket"),
	"websocket.tls":                  fact("WebSocket"),
	"websocket.tls.cert_file":        rolls("a constant path (the client certificate)"),
	"websocket.tls.key_file":         rolls("a constant path"),
	"websocket.tls.ca_file":          rolls("as tls.ca_file"),
	"websocket.tls.verify":           fact("ClientVerify"),
	"websocket.tls.timeout":          rolls("a constant"),
	"websocket.same_origin":          fact("WebSocket"),
	"websocket.allowed_origins":      fact("WebSocket"),
	"websocket.compression":          fact("WebSocket"),
	"mqtt":                           fact("MQTT"),
	"mqtt.port":                      fact("MQTT"),
	"mqtt.tls":                       fact("MQTT"),
	"mqtt.tls.cert_file":             rolls("a constant path (the client certificate)"),
	"mqtt.tls.key_file":              rolls("a constant path"),
	"mqtt.tls.ca_file":               rolls("as tls.ca_file"),
	"mqtt.tls.verify":                fact("ClientVerify"),
	"mqtt.tls.timeout":               rolls("a constant"),
	"mqtt.ack_wait":                  fact("MQTTDelivery"),
	"mqtt.max_ack_pending":           fact("MQTTDelivery"),
	"mqtt.stream_replicas":           fact("MQTTDelivery"),
}

// factsOf computes the facts of a config. version is the image tag the
// config runs under; operatorKey the operator JWT's subject.
func factsOf(c *serverConfig, version, operatorKey string) Facts {
	f := Facts{
		Version: version,

		ServerTags:          sortedCompact(c.ServerTags),
		SystemUser:          c.hasSystemUser(),
		SystemUserNKey:      c.systemUserNKey(),
		MonitorTLS:          c.HTTPS != "",
		ClientTLS:           c.TLS != nil,
		LameDuckDuration:    c.LameDuckDuration,
		LameDuckGracePeriod: c.LameDuckGracePeriod,
	}
	if c.TLS != nil {
		f.ClientVerify = c.TLS.Verify
	}
	if c.Cluster != nil {
		f.ClusterName = c.Cluster.Name
		f.RouteTLS = c.Cluster.TLS != nil
	}
	if w := c.WebSocket; w != nil {
		f.WebSocket = w.canonical()
	}
	if m := c.MQTT; m != nil {
		f.MQTT = m.listener()
		f.MQTTDelivery = m.delivery()
	}
	if l := c.LeafNodes; l != nil {
		f.LeafnodesAccept = l.Listen != ""
		f.LeafnodesTLS = l.TLS != nil
		f.LeafnodeRemotes = l.remotesCanonical()
		if c.ServerMetadata.LeafCAs != "" {
			f.LeafnodeRemotes += "; cas=" + c.ServerMetadata.LeafCAs
		}
	}
	if g := c.Gateway; g != nil {
		f.Gateway = true
		f.GatewayRemotes = g.canonical()
		f.GatewayTLS = g.TLS != nil
		f.GatewayCA = c.ServerMetadata.GatewayCA
	}
	f.RoutesCertificate = c.ServerMetadata.RoutesCertificate
	f.ClientCertificate = c.ServerMetadata.ClientCertificate
	if c.Operator != "" {
		f.Operator = operatorKey
		f.SystemAccount = c.SystemAccount
		for k, jwt := range c.ResolverPreload {
			if k != c.SystemAccount {
				f.Accounts = append(f.Accounts, k+"@"+digest([]byte(jwt)))
			}
		}
		f.Accounts = sortedCompact(f.Accounts)
		if c.Resolver != nil {
			f.Resolver = c.Resolver.Type
		}
	}
	if js := c.JetStream; js != nil {
		f.JetStream = true
		f.JetStreamDomain = js.Domain
		if js.MaxMemoryStore != nil {
			f.MaxMemoryStore = *js.MaxMemoryStore
		}
		if js.MaxFileStore != nil {
			f.MaxFileStore = *js.MaxFileStore
		}
	}
	return f
}

func sortedCompact(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

// RunningConfig is what a server's existing nats.conf says.
type RunningConfig struct {
	// Facts are its facts, Version the image tag it runs under.
	Facts Facts
	// Revision is its server_metadata.config_revision.
	Revision string
	// digest is the digest of the config without the revision, comparable
	// with the rendered config's.
	digest string
}

// ReadConfig reads the facts and revision of a config this package rendered,
// as a server's ConfigMap holds it (conf is the ConfigKey entry); version is
// the image tag it runs under (ImageVersion). It is the one place nats.conf is
// read back, so the controller never parses it. A config that cannot be read
// is an error; the caller treats the server as on no known config.
func ReadConfig(conf []byte, version string) (RunningConfig, error) {
	var c serverConfig
	if err := json.Unmarshal(conf, &c); err != nil {
		return RunningConfig{Facts: Facts{Version: version}}, fmt.Errorf("reading nats.conf: %w", err)
	}
	key := ""
	if c.Operator != "" {
		oc, err := jwt.DecodeOperatorClaims(c.Operator)
		if err != nil {
			return RunningConfig{Facts: Facts{Version: version}}, fmt.Errorf("reading the operator JWT of nats.conf: %w", err)
		}
		key = oc.Subject
	}
	rev := c.ServerMetadata.ConfigRevision
	stripped, err := insertRevisionAt(conf, rev, "")
	if err != nil {
		return RunningConfig{Facts: Facts{Version: version}}, err
	}
	return RunningConfig{Facts: factsOf(&c, version, key), Revision: rev, digest: digest(stripped)}, nil
}

// ImageVersion is the tag of a StatefulSet's nats container image, e.g.
// 2.15.2 for nats:2.15.2@sha256:...; "" when it has none.
func ImageVersion(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		img, _, _ := strings.Cut(c.Image, "@")
		if i := strings.LastIndex(img, ":"); i >= 0 && !strings.Contains(img[i:], "/") {
			return img[i+1:]
		}
	}
	return ""
}

// insertRevisionAt replaces the revision value old of a rendered config by
// rev. Every other string in the config is JSON-escaped, so the key with its
// unescaped quotes appears once.
func insertRevisionAt(cfg []byte, old, rev string) ([]byte, error) {
	at := []byte(`"config_revision": "` + old + `"`)
	i := bytes.LastIndex(cfg, at)
	if i < 0 {
		return nil, fmt.Errorf("no config_revision %q in the config", old)
	}
	out := make([]byte, 0, len(cfg)+len(rev))
	out = append(out, cfg[:i]...)
	out = append(out, `"config_revision": "`+rev+`"`...)
	out = append(out, cfg[i+len(at):]...)
	return out, nil
}
