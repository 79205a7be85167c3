package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Input is what a NatsCluster renders from.
type Input struct {
	// Cluster is the NatsCluster: its name, namespace, uid and spec are used.
	// It is not modified.
	Cluster *clusterv1beta1.NatsCluster
	// Trust is the resolved trust: nil without spec.auth, required with it.
	Trust *Trust
}

// Output is every object of the cluster, ready to apply.
type Output struct {
	// Revision is the target config revision (10 hex characters), written in
	// every server's config and pod template.
	Revision string
	// Servers in ordinal order.
	Servers []Server
	// ClientService is "<name>" on the client port.
	ClientService *corev1.Service
	// HeadlessService is "<name>-headless" with every port.
	HeadlessService *corev1.Service
	// PDB is "<name>" with maxUnavailable 1.
	PDB *policyv1.PodDisruptionBudget
	// Auth is the auth mode every server runs with.
	Auth AuthMode
}

// Server is one server's objects.
type Server struct {
	// Name is the server name, e.g. demo-0: server_name, StatefulSet name.
	Name    string
	Ordinal int32
	// Config is nats.conf (JSON), the revision included.
	Config []byte
	// ConfigMap holds Config under ConfigKey.
	ConfigMap *corev1.ConfigMap
	// StatefulSet runs the server, the revision annotation included.
	StatefulSet *appsv1.StatefulSet
	// ConfigDigest is a digest (10 hex characters) of Config without the
	// revision: equal digests mean the same config apart from the revision.
	ConfigDigest string
	// TemplateDigest is a digest (10 hex characters) of the StatefulSet spec
	// without the revision annotation.
	TemplateDigest string
}

// AuthMode is how a server authenticates clients.
type AuthMode struct {
	// Operator is the NATS operator's public key; "" means no auth (every
	// client in the global account).
	Operator string
	// SystemAccount is the system account's public key ("" without auth).
	SystemAccount string
}

// Enabled reports whether the servers run in operator mode.
func (a AuthMode) Enabled() bool { return a.Operator != "" }

// String is "none" or "operator <key> system account <key>".
func (a AuthMode) String() string {
	if !a.Enabled() {
		return "none"
	}
	return "operator " + a.Operator + " system account " + a.SystemAccount
}

// Render renders every object of in.Cluster. A trust that fails validation
// gives a *TrustError; a spec that fails a check the CRD cannot make gives a
// *SpecError; a spec it cannot render gives another error. On error
// nothing is returned.
func Render(in Input) (*Output, error) {
	nc := in.Cluster
	if nc == nil {
		return nil, errors.New("render: no NatsCluster")
	}
	if nc.Name == "" || nc.Namespace == "" {
		return nil, errors.New("render: the NatsCluster has no name or namespace")
	}
	if nc.Spec.Replicas < 1 {
		return nil, fmt.Errorf("render: spec.replicas is %d, must be at least 1", nc.Spec.Replicas)
	}
	if nc.Spec.Version == "" {
		return nil, errors.New("render: spec.version is empty")
	}
	if err := validateSpec(&nc.Spec); err != nil {
		return nil, err
	}

	var trust *validTrust
	var auth AuthMode
	if nc.Spec.Auth != nil {
		var err error
		if trust, err = validateTrust(nc.Spec.Auth, in.Trust); err != nil {
			return nil, err
		}
		auth = AuthMode{Operator: trust.operatorKey, SystemAccount: trust.systemAccount}
	} else if in.Trust != nil {
		return nil, errors.New("render: a trust was given but spec.auth is absent")
	}

	shared, err := newSharedConfig(nc, trust)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	operatorJWT := ""
	if trust != nil {
		operatorJWT = in.Trust.OperatorJWT
	}

	n := nc.Spec.Replicas
	out := &Output{
		Servers:         make([]Server, n),
		ClientService:   clientService(nc),
		HeadlessService: headlessService(nc),
		PDB:             pdb(nc),
		Auth:            auth,
	}

	// First pass: everything without the revision, hashed.
	revHash := sha256.New()
	var specJSON bytes.Buffer
	for i := range n {
		cfg, err := marshalConfig(shared.server(nc, i, operatorJWT))
		if err != nil {
			return nil, fmt.Errorf("render: encoding the config of %s: %w", ServerName(nc.Name, i), err)
		}
		sts := statefulSet(nc, i, "")
		specJSON.Reset()
		if err := encodeCanonicalSpec(&specJSON, &sts.Spec); err != nil {
			return nil, fmt.Errorf("render: encoding the StatefulSet of %s: %w", ServerName(nc.Name, i), err)
		}
		writeFramed(revHash, cfg)
		writeFramed(revHash, specJSON.Bytes())
		out.Servers[i] = Server{
			Name:           ServerName(nc.Name, i),
			Ordinal:        i,
			Config:         cfg,
			StatefulSet:    sts,
			ConfigDigest:   digest(cfg),
			TemplateDigest: digest(specJSON.Bytes()),
		}
	}
	out.Revision = hex.EncodeToString(revHash.Sum(nil))[:10]

	// Second pass: insert the revision.
	for i := range out.Servers {
		s := &out.Servers[i]
		cfg, err := insertRevision(s.Config, out.Revision)
		if err != nil {
			return nil, fmt.Errorf("render: config of %s: %w", s.Name, err)
		}
		s.Config = cfg
		s.ConfigMap = configMap(nc, s.Ordinal, cfg)
		s.StatefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision] = out.Revision
	}
	return out, nil
}

// revisionPlaceholder is how the empty revision renders. Every other string
// in the config is JSON-escaped, so its unescaped quotes can only be this
// key and its empty value.
var revisionPlaceholder = []byte(`"config_revision": ""`)

func insertRevision(cfg []byte, rev string) ([]byte, error) {
	i := bytes.LastIndex(cfg, revisionPlaceholder)
	if i < 0 {
		return nil, errors.New("no config_revision to fill in")
	}
	at := i + len(revisionPlaceholder) - 1 // the closing quote
	out := make([]byte, 0, len(cfg)+len(rev))
	out = append(out, cfg[:at]...)
	out = append(out, rev...)
	out = append(out, cfg[at:]...)
	return out, nil
}

// writeFramed writes b with its length, so that no two sequences of parts
// hash alike.
func writeFramed(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}

// encodeCanonicalSpec encodes a StatefulSet spec for hashing, its resource
// quantities written in one canonical form: "1Gi" and "1073741824" are the
// same object to Kubernetes, so they give the same revision.
func encodeCanonicalSpec(buf *bytes.Buffer, spec *appsv1.StatefulSetSpec) error {
	var restore []func()
	canon := func(l corev1.ResourceList) {
		if len(l) == 0 {
			return
		}
		orig := maps.Clone(l)
		for k, q := range l {
			l[k] = *resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)
		}
		restore = append(restore, func() { maps.Copy(l, orig) })
	}
	for i := range spec.Template.Spec.Containers {
		r := &spec.Template.Spec.Containers[i].Resources
		canon(r.Limits)
		canon(r.Requests)
	}
	for i := range spec.VolumeClaimTemplates {
		r := &spec.VolumeClaimTemplates[i].Spec.Resources
		canon(r.Limits)
		canon(r.Requests)
	}
	err := json.NewEncoder(buf).Encode(spec)
	for _, f := range restore {
		f()
	}
	return err
}
