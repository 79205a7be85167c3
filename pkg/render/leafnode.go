package render

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// LeafNodePort is the leaf port of every server with
// spec.leafnodes.accept.
const LeafNodePort int32 = clusterv1beta1.LeafNodePort

// LeafNodePortName is the name of the leaf port (container, Services).
const LeafNodePortName = "leafnodes"

// LeafCredentialsSuffix names the Secret <name>-leaf-credentials the
// controller keeps for a cluster with leaf remotes that have credentials
// or TLS: a copy of each remote's creds file under
// LeafCredentialsKey(remote), and of the CA its hub is verified against
// under LeafCAKey(remote). The
// config volume projects it (optional: it need not exist), so the creds
// files sit next to nats.conf (ConfigDir) and reach the server in the same
// atomic update as the config that names them, and adding a remote with
// credentials changes no pod template (a reload, not a restart). See
// LeafCredentialsProjected for which clusters project it.
const LeafCredentialsSuffix = "-leaf-credentials"

// LeafCredentialsSecretName is the Secret <name>-leaf-credentials.
func LeafCredentialsSecretName(cluster string) string { return cluster + LeafCredentialsSuffix }

// LeafCredentialsKey is the key of remote's creds file in the Secret
// <name>-leaf-credentials, and its file name in ConfigDir.
func LeafCredentialsKey(remote string) string { return "leaf-" + remote + ".creds" }

// LeafCredentialsProjected says whether the servers' config volume
// projects the Secret <name>-leaf-credentials: for a cluster with a leaf
// remote with credentials, for a new cluster (no StatefulSet yet), so
// that credentials added later reload, and for one whose StatefulSets
// project it already, so that it stays. A cluster an earlier release made
// keeps its pod template until a remote with credentials needs the
// Secret: then its servers restart once, one at a time.
func LeafCredentialsProjected(nc *clusterv1beta1.NatsCluster, running []RunningServer) bool {
	if l := nc.Spec.LeafNodes; l != nil && slices.ContainsFunc(l.Remotes, func(r clusterv1beta1.LeafNodeRemote) bool { return r.Credentials != nil || r.TLS != nil }) {
		return true
	}
	created := false
	for _, r := range running {
		if r.StatefulSet == nil {
			continue
		}
		created = true
		if projectsSecret(r.StatefulSet.Spec.Template.Spec.Volumes, LeafCredentialsSecretName(nc.Name)) {
			return true
		}
	}
	return !created
}

// projectsSecret says the config volume of volumes projects Secret name.
func projectsSecret(volumes []corev1.Volume, name string) bool {
	for _, v := range volumes {
		if v.Name != ConfigVolumeName || v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret != nil && s.Secret.Name == name {
				return true
			}
		}
	}
	return false
}

// leafNodesConfig is nats.conf's leafnodes block.
type leafNodesConfig struct {
	Listen  string       `json:"listen,omitempty"`
	TLS     *tlsConfig   `json:"tls,omitempty"`
	Remotes []leafRemote `json:"remotes,omitempty"`
}

type leafRemote struct {
	URLs        []string       `json:"urls"`
	Credentials string         `json:"credentials,omitempty"`
	Account     string         `json:"account,omitempty"`
	TLS         *leafRemoteTLS `json:"tls,omitempty"`
}

// leafRemoteTLS is a remote's tls block: the CA the hub is verified
// against, nothing else (a leaf presents no certificate; no timeout, which
// nats-server would not reload).
type leafRemoteTLS struct {
	CAFile string `json:"ca_file"`
}

// LeafCAKey is the key of remote's CA file in the Secret
// <name>-leaf-credentials, and its file name in ConfigDir.
func LeafCAKey(remote string) string { return "leaf-" + remote + ".ca.crt" }

// LeafURL is the leaf URL of a NatsCluster's servers through its headless
// Service: "nats://hub-headless.ns.svc:7422".
func LeafURL(cluster, namespace string) string {
	return fmt.Sprintf("nats://%s.%s.svc:%d", HeadlessServiceName(cluster), namespace, LeafNodePort)
}

// leafNodesOf renders spec.leafnodes, or nil without it (or with neither
// accept nor a remote). spec.leafnodes.tls renders the listener's TLS with
// the routes' certificate (a SpecError without route TLS), not verifying
// leaves; a remote's tls names its CA file, which the controller copies
// into <name>-leaf-credentials.
func leafNodesOf(nc *clusterv1beta1.NatsCluster, tls TLS) (*leafNodesConfig, error) {
	l := nc.Spec.LeafNodes
	if l == nil || (!l.Accept && len(l.Remotes) == 0) {
		return nil, nil
	}
	out := &leafNodesConfig{}
	if l.Accept {
		out.Listen = fmt.Sprintf("0.0.0.0:%d", LeafNodePort)
	}
	if l.TLS != nil && l.Accept {
		if tls.Routes == nil {
			return nil, &SpecError{Field: "spec.leafnodes.tls", Message: "needs route TLS: every server presents the routes' certificate to leaves, and spec.routes.tls is Disabled"}
		}
		out.TLS = tlsBlock(&TLSFiles{CertKey: tls.Routes.CertKey, KeyKey: tls.Routes.KeyKey}, RoutesTLSDir)
	}
	for i, r := range l.Remotes {
		field := fmt.Sprintf("spec.leafnodes.remotes[%d]", i)
		// validateStoredLeafNodes made sure of exactly one of clusterRef
		// and urls.
		remote := leafRemote{Account: r.Account, URLs: slices.Clone(r.URLs)}
		if r.ClusterRef != nil {
			name, ns, err := otherCluster(nc, r.ClusterRef, field+".clusterRef")
			if err != nil {
				return nil, err
			}
			remote.URLs = []string{LeafURL(name, ns)}
		}
		for _, u := range remote.URLs {
			if err := checkConfigString(field+".urls entry", u); err != nil {
				return nil, &SpecError{Field: field + ".urls", Message: err.Error()}
			}
		}
		if r.Credentials != nil {
			remote.Credentials = ConfigDir + "/" + LeafCredentialsKey(r.Name)
		}
		if r.TLS != nil {
			remote.TLS = &leafRemoteTLS{CAFile: ConfigDir + "/" + LeafCAKey(r.Name)}
		}
		out.Remotes = append(out.Remotes, remote)
	}
	return out, nil
}

// listen is LeafnodesAccept of the facts; remotes LeafnodeRemotes: each
// remote as urls (sorted) with its credentials file and account, sorted.
func (l *leafNodesConfig) remotesCanonical() string {
	var parts []string
	for _, r := range l.Remotes {
		p := strings.Join(slices.Sorted(slices.Values(r.URLs)), ",")
		if r.Credentials != "" {
			p += " credentials=" + r.Credentials
		}
		if r.TLS != nil {
			p += " tls"
		}
		if r.Account != "" {
			p += " account=" + r.Account
		}
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// The CRD's patterns of spec.leafnodes, for a stored object that skipped
// them.
var (
	leafRemoteNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	leafURLRE        = regexp.MustCompile(`^(nats|tls|nats-leaf|ws|wss)://[^\s/?#]+:[0-9]{1,5}$`)
	leafAccountRE    = regexp.MustCompile(`^[A-Za-z0-9$_-]+$`)
)

// validateStoredLeafNodes refuses what the CRD refuses of spec.leafnodes.
func validateStoredLeafNodes(l *clusterv1beta1.LeafNodesSpec) error {
	if l == nil {
		return nil
	}
	if l.TLS != nil && !l.Accept {
		return &SpecError{Field: "spec.leafnodes.tls", Message: "is the TLS of the leaf listener: it needs accept"}
	}
	seen := map[string]bool{}
	for i, r := range l.Remotes {
		field := fmt.Sprintf("spec.leafnodes.remotes[%d]", i)
		switch {
		case len(r.Name) > 63 || !leafRemoteNameRE.MatchString(r.Name):
			return &SpecError{Field: field + ".name", Message: fmt.Sprintf("%q must be a DNS label (lower case letters, digits and '-')", r.Name)}
		case seen[r.Name]:
			return &SpecError{Field: field, Message: fmt.Sprintf("a second remote named %q", r.Name)}
		case (r.ClusterRef != nil) == (len(r.URLs) > 0):
			return &SpecError{Field: field, Message: "a leaf remote names exactly one of clusterRef and urls"}
		case r.Account != "" && (len(r.Account) > 64 || !leafAccountRE.MatchString(r.Account)):
			return &SpecError{Field: field + ".account", Message: fmt.Sprintf("%q is no account name or public key", r.Account)}
		case r.Credentials != nil && r.Credentials.Name == "":
			return &SpecError{Field: field + ".credentials.name", Message: "names no Secret"}
		case r.TLS != nil && r.ClusterRef == nil && r.TLS.CASecret == nil:
			return &SpecError{Field: field + ".tls", Message: "tls on a leaf remote by urls needs tls.caSecret, the CA the hub's certificate is verified against"}
		}
		seen[r.Name] = true
		for j, u := range r.URLs {
			if !leafURLRE.MatchString(u) {
				return &SpecError{Field: fmt.Sprintf("%s.urls[%d]", field, j), Message: fmt.Sprintf("%q must be nats://, tls://, nats-leaf://, ws:// or wss:// host:port", u)}
			}
		}
	}
	return nil
}
