package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// terminationGraceMarginSeconds is what the termination grace period gives
// a server beyond its lame duck duration and grace period. On the preStop
// signal the server moves its Raft leaders away, shuts JetStream down,
// stops accepting clients, waits the grace period, then closes its clients
// spread over the rest of the duration (at most a second apart): it exits
// at most about the duration after the signal, well inside the termination
// grace period.
const terminationGraceMarginSeconds = 20

// LameDuckOf returns the lame_duck_duration and lame_duck_grace_period a
// spec renders: spec.lameDuck's, each unset one
// clusterv1beta1.DefaultLameDuckDuration or DefaultLameDuckGracePeriod.
func LameDuckOf(spec *clusterv1beta1.NatsClusterSpec) (duration, gracePeriod metav1.Duration) {
	duration.Duration, gracePeriod.Duration = clusterv1beta1.DefaultLameDuckDuration, clusterv1beta1.DefaultLameDuckGracePeriod
	if ld := spec.LameDuck; ld != nil {
		if ld.Duration != nil {
			duration = *ld.Duration
		}
		if ld.GracePeriod != nil {
			gracePeriod = *ld.GracePeriod
		}
	}
	return duration, gracePeriod
}

// TerminationGracePeriodOf is the terminationGracePeriodSeconds of a
// spec's pods: the lame duck duration plus the grace period, rounded up to
// a second, plus 20s; 60 with the defaults.
func TerminationGracePeriodOf(spec *clusterv1beta1.NatsClusterSpec) int64 {
	duration, gracePeriod := LameDuckOf(spec)
	return int64(math.Ceil((duration.Duration + gracePeriod.Duration).Seconds())) + terminationGraceMarginSeconds
}

// serverConfig is a server's nats.conf. Field order is the JSON key order.
type serverConfig struct {
	ServerName          string            `json:"server_name"`
	Listen              string            `json:"listen"`
	TLS                 *tlsConfig        `json:"tls,omitempty"`
	HTTP                string            `json:"http,omitempty"`
	HTTPS               string            `json:"https,omitempty"`
	PidFile             string            `json:"pid_file"`
	LameDuckDuration    string            `json:"lame_duck_duration"`
	LameDuckGracePeriod string            `json:"lame_duck_grace_period"`
	Cluster             *clusterConfig    `json:"cluster,omitempty"`
	Gateway             *gatewayConfig    `json:"gateway,omitempty"`
	LeafNodes           *leafNodesConfig  `json:"leafnodes,omitempty"`
	WebSocket           *websocketConfig  `json:"websocket,omitempty"`
	MQTT                *mqttConfig       `json:"mqtt,omitempty"`
	JetStream           *jetStreamConfig  `json:"jetstream,omitempty"`
	ServerTags          []string          `json:"server_tags,omitempty"`
	Accounts            *accountsConfig   `json:"accounts,omitempty"`
	Operator            string            `json:"operator,omitempty"`
	SystemAccount       string            `json:"system_account,omitempty"`
	Resolver            *resolverConfig   `json:"resolver,omitempty"`
	ResolverPreload     map[string]string `json:"resolver_preload,omitempty"`
	ServerMetadata      serverMetadata    `json:"server_metadata"`
}

type clusterConfig struct {
	Name   string     `json:"name"`
	Listen string     `json:"listen"`
	TLS    *tlsConfig `json:"tls,omitempty"`
	Routes []string   `json:"routes"`
}

type jetStreamConfig struct {
	StoreDir       string `json:"store_dir"`
	MaxMemoryStore *int64 `json:"max_memory_store,omitempty"`
	MaxFileStore   *int64 `json:"max_file_store,omitempty"`
	Domain         string `json:"domain,omitempty"`
}

type resolverConfig struct {
	Type        string `json:"type"`
	Dir         string `json:"dir,omitempty"`
	AllowDelete *bool  `json:"allow_delete,omitempty"`
	Interval    string `json:"interval,omitempty"`
}

type serverMetadata struct {
	ConfigRevision string `json:"config_revision"`
	// RoutesCertificate and ClientCertificate are the digests of the TLS
	// Secrets (TLSFiles.Digest): a new certificate is a new config.
	RoutesCertificate string `json:"routes_certificate,omitempty"`
	ClientCertificate string `json:"client_certificate,omitempty"`
	// GatewayCA is the digest of the gateway CA bundle (TLSFiles.CADigest
	// of TLS.Gateway): another bundle is a new config.
	GatewayCA string `json:"gateway_ca,omitempty"`
	// LeafCAs is the digest of the leaf remotes' CAs (TLS.LeafCAs).
	LeafCAs string `json:"leaf_cas,omitempty"`
}

// marshalConfig renders the config as indented JSON. nats-server's config
// lexer knows no \u escapes, so HTML escaping is off and strings that would
// need one are refused before rendering (see checkConfigString).
func marshalConfig(c *serverConfig) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(2048 + len(c.Operator) + 1024*len(c.ResolverPreload))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkConfigString refuses a string nats-server's config lexer could not
// read back once JSON-encoded: control characters and the line and paragraph
// separators, which encoding/json writes as \u escapes.
func checkConfigString(what, s string) error {
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("%s %q contains the character %U, which nats.conf cannot hold", what, s, r)
		}
	}
	return nil
}

// SeedServers is how many servers every server's cluster.routes lists at
// least: the first ones, demo-0 to demo-2 (every server of a smaller
// cluster). A server beyond them lists every server before it as well, so
// each pair of servers has a route the later one solicits, and a server's
// routes do not depend on spec.replicas: adding (or later removing) a server
// beyond the seeds changes no other server's config. Route gossip alone does
// not connect two servers that name only the seeds (measured by
// TestScaleUpRouteGossip in pkg/rollout).
const SeedServers = 3

// sharedConfig is the parts of every server's config shared by all
// servers, rendered once.
type sharedConfig struct {
	// routes are the route URLs of every server, by ordinal; a server's
	// config lists the first max(seeds, its ordinal+1) of them.
	routes    []string
	seeds     int32
	jetStream *jetStreamConfig
	tags      []string
	trust     *validTrust
	resolver  *resolverConfig
	accounts  *accountsConfig
	tls       TLS
	// gateway is spec.gateway's block, nil without it; clusterName is
	// cluster.name (the gateway name with a gateway: nats-server requires
	// them equal).
	gateway     *gatewayConfig
	leafNodes   *leafNodesConfig
	websocket   *websocketConfig
	mqtt        *mqttConfig
	clusterName string
	// standalone: one server with JetStream runs without the cluster
	// block (with it, naming only itself, it waits for JetStream meta
	// peers forever).
	standalone bool
	monitorTLS bool
	// lameDuckDuration and lameDuckGracePeriod are as nats.conf holds
	// them (time.Duration's String: 30s, 1m30s, 1.5s).
	lameDuckDuration, lameDuckGracePeriod string
}

func newSharedConfig(nc *clusterv1beta1.NatsCluster, trust *validTrust, systemUser *SystemUser, tls TLS) (*sharedConfig, error) {
	s := &sharedConfig{trust: trust, tls: tls}
	var err error
	if s.accounts, err = systemUserAccounts(systemUser, nc.Spec.Auth != nil); err != nil {
		return nil, err
	}
	s.routes = make([]string, 0, nc.Spec.Replicas)
	for i := range nc.Spec.Replicas {
		s.routes = append(s.routes, RouteURL(nc.Name, nc.Namespace, i))
	}
	s.seeds = min(nc.Spec.Replicas, SeedServers)
	if s.gateway, err = gatewayOf(nc, tls); err != nil {
		return nil, err
	}
	if s.leafNodes, err = leafNodesOf(nc, tls); err != nil {
		return nil, err
	}
	s.websocket, s.mqtt = websocketOf(nc, tls), mqttOf(nc, tls)
	s.standalone = nc.Spec.Replicas == 1 && nc.Spec.JetStream != nil
	s.monitorTLS = MonitorTLS(&nc.Spec)
	s.clusterName = nc.Name
	if s.gateway != nil {
		s.clusterName = s.gateway.Name
	}
	duration, gracePeriod := LameDuckOf(&nc.Spec)
	s.lameDuckDuration, s.lameDuckGracePeriod = duration.Duration.String(), gracePeriod.Duration.String()
	if js := nc.Spec.JetStream; js != nil {
		s.jetStream = &jetStreamConfig{StoreDir: JetStreamStoreDir, Domain: js.Domain}
		limits := DeriveJetStreamLimits(&nc.Spec)
		if limits.MaxMemoryStore != nil {
			v := limits.MaxMemoryStore.Value()
			s.jetStream.MaxMemoryStore = &v
		}
		if limits.MaxFileStore != nil {
			v := limits.MaxFileStore.Value()
			s.jetStream.MaxFileStore = &v
		}
	}
	if len(nc.Spec.ServerTags) > 0 {
		keys := slices.Sorted(maps.Keys(nc.Spec.ServerTags))
		s.tags = make([]string, 0, len(keys))
		for _, k := range keys {
			tag := k + ":" + nc.Spec.ServerTags[k]
			if err := checkConfigString("spec.serverTags entry", tag); err != nil {
				return nil, err
			}
			s.tags = append(s.tags, tag)
		}
	}
	if trust != nil {
		switch r := nc.Spec.Auth.Resolver; r {
		case clusterv1beta1.ResolverFull, "":
			f := false
			s.resolver = &resolverConfig{Type: "full", Dir: ResolverDir, AllowDelete: &f, Interval: "2m"}
		case clusterv1beta1.ResolverCache:
			s.resolver = &resolverConfig{Type: "cache", Dir: ResolverDir}
		case clusterv1beta1.ResolverMemory:
			s.resolver = &resolverConfig{Type: MemoryResolver}
		default:
			return nil, fmt.Errorf("spec.auth.resolver %q is none of %s, %s and %s", r, clusterv1beta1.ResolverFull, clusterv1beta1.ResolverCache, clusterv1beta1.ResolverMemory)
		}
	}
	return s, nil
}

func (s *sharedConfig) server(nc *clusterv1beta1.NatsCluster, ordinal int32, operatorJWT string) *serverConfig {
	c := &serverConfig{
		ServerName:          ServerName(nc.Name, ordinal),
		Listen:              fmt.Sprintf("0.0.0.0:%d", ClientPort),
		PidFile:             PidFile,
		LameDuckDuration:    s.lameDuckDuration,
		LameDuckGracePeriod: s.lameDuckGracePeriod,
		Gateway:             s.gateway,
		LeafNodes:           s.leafNodes,
		WebSocket:           s.websocket,
		MQTT:                s.mqtt,
		JetStream:           s.jetStream,
		ServerTags:          s.tags,
		Accounts:            s.accounts,
		TLS:                 tlsBlock(s.tls.Client, ClientTLSDir),
	}
	monitor := fmt.Sprintf("0.0.0.0:%d", MonitorPort)
	if s.monitorTLS {
		c.HTTPS = monitor
	} else {
		c.HTTP = monitor
	}
	if !s.standalone {
		c.Cluster = &clusterConfig{
			Name:   s.clusterName,
			Listen: fmt.Sprintf("0.0.0.0:%d", ClusterPort),
			Routes: s.routes[:max(s.seeds, ordinal+1)],
			TLS:    tlsBlock(s.tls.Routes, RoutesTLSDir),
		}
	}
	if s.tls.Routes != nil {
		c.ServerMetadata.RoutesCertificate = s.tls.Routes.Digest
	}
	if s.tls.Client != nil {
		c.ServerMetadata.ClientCertificate = s.tls.Client.Digest
	}
	if s.gateway != nil && s.gateway.TLS != nil {
		c.ServerMetadata.GatewayCA = s.tls.Gateway.CADigest
	}
	if s.leafNodes != nil && slices.ContainsFunc(s.leafNodes.Remotes, func(r leafRemote) bool { return r.TLS != nil }) {
		c.ServerMetadata.LeafCAs = s.tls.LeafCAs
	}
	if s.trust != nil {
		c.Operator = operatorJWT
		c.SystemAccount = s.trust.systemAccount
		c.Resolver = s.resolver
		c.ResolverPreload = s.trust.preload
	}
	return c
}

// DeriveJetStreamLimits returns the JetStream limits every server's config
// gets, as the README's API section says: spec.jetstream.limits where set; otherwise
// max_memory_store = 75% of resources.limits.memory and max_file_store = 95%
// of the claim template's storage request, both rounded down to a byte. A
// limit that cannot be derived is nil (nats-server then picks its own
// default). Nil without JetStream. The controller reports it in
// status.jetstream.limits.
//
// Example: limits.memory 1Gi (1073741824) gives max_memory_store 805306368;
// a 10Gi claim gives max_file_store 10200547328.
func DeriveJetStreamLimits(spec *clusterv1beta1.NatsClusterSpec) *clusterv1beta1.JetStreamLimits {
	js := spec.JetStream
	if js == nil {
		return nil
	}
	out := &clusterv1beta1.JetStreamLimits{}
	if js.Limits != nil && js.Limits.MaxMemoryStore != nil {
		q := js.Limits.MaxMemoryStore.DeepCopy()
		out.MaxMemoryStore = &q
	} else if mem, ok := NatsResources(spec).Limits[corev1.ResourceMemory]; ok && mem.Sign() > 0 {
		out.MaxMemoryStore = percentOf(mem.Value(), 75)
	}
	if js.Limits != nil && js.Limits.MaxFileStore != nil {
		q := js.Limits.MaxFileStore.DeepCopy()
		out.MaxFileStore = &q
	} else if vct := js.VolumeClaimTemplate; vct != nil {
		if st, ok := vct.Spec.Resources.Requests[corev1.ResourceStorage]; ok && st.Sign() > 0 {
			out.MaxFileStore = percentOf(st.Value(), 95)
		}
	}
	return out
}

// GoMemLimit is the GOMEMLIMIT value for a memory limit: 90% of it in bytes,
// rounded down ("966367641" for 1Gi), or "" without a memory limit.
func GoMemLimit(resources corev1.ResourceRequirements) string {
	mem, ok := resources.Limits[corev1.ResourceMemory]
	if !ok || mem.Sign() <= 0 {
		return ""
	}
	q := percentOf(mem.Value(), 90)
	return fmt.Sprintf("%d", q.Value())
}

// percentOf returns pct% of v bytes, rounded down, without overflowing for
// any int64 v.
func percentOf(v int64, pct int64) *resource.Quantity {
	r := v/100*pct + v%100*pct/100
	return resource.NewQuantity(r, resource.BinarySI)
}

// imageRef is <repository>:<version>[@<digest>].
func imageRef(spec *clusterv1beta1.NatsClusterSpec) string {
	repo := spec.Image.Repository
	if repo == "" {
		repo = "nats"
	}
	var b strings.Builder
	b.WriteString(repo)
	b.WriteByte(':')
	b.WriteString(spec.Version)
	if spec.Image.Digest != "" {
		b.WriteByte('@')
		b.WriteString(spec.Image.Digest)
	}
	return b.String()
}
