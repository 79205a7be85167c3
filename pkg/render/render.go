package render

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Input is what a NatsCluster renders from.
type Input struct {
	// Cluster is the NatsCluster: its name, namespace, uid and spec are used.
	// It is not modified.
	Cluster *clusterv1beta1.NatsCluster
	// Trust is the resolved trust: nil without spec.auth, required with it.
	Trust *Trust
	// SystemUser is the controller's user of the built-in system account,
	// rendered into every server's config: only without spec.auth (Render
	// refuses one with it); nil renders no accounts block, the config of
	// before the system user existed, byte for byte.
	SystemUser *SystemUser
	// FreshSystemUser is a system user the cluster does not have yet (a new
	// Secret the controller would create), for a cluster without spec.auth
	// and without SystemUser: Render renders it when no server has objects
	// yet (a new cluster) or when the objects of some server change anyway,
	// and says so in Output.FreshSystemUser; not for a cluster an older
	// release made that has nothing to change, so an upgrade of the
	// controller restarts and rewrites nothing. Ignored with spec.auth or
	// SystemUser.
	FreshSystemUser *SystemUser
	// Running are the servers' existing objects, by ordinal (any order; a
	// server without objects may be left out; servers beyond spec.replicas,
	// still being removed, may be given too). They change no rendered
	// content but the FreshSystemUser choice and the route TLS default
	// (RouteTLSMode): when a server's existing objects equal the rendered ones apart
	// from the revisions, the revision they carry is kept (see "The
	// revisions" in doc.go), so a server written by an older release is not
	// restarted by a new way of computing revisions.
	Running []RunningServer
	// TLS are the routes' and clients' certificates (spec.routes.tls and
	// spec.tls as the controller resolved them); zero for plain TCP.
	TLS TLS
	// ControllerNamespace is where the controller runs: the NetworkPolicy
	// admits its pods to the client and monitoring ports. Empty means
	// DefaultControllerNamespace.
	ControllerNamespace string
	// Now is the time of the sync, for the validity window of the trust's
	// JWTs (CheckJWTCurrent, Output.TrustExpiring): render never reads the
	// clock. Zero skips those checks.
	Now time.Time
	// PodTemplatePolicy is the controller's pod template policy
	// (--pod-template-policy): a cluster it does not allow gives a
	// *SpecError naming the field and the policy, and nothing is rendered.
	// The zero value allows everything the CRD accepts.
	PodTemplatePolicy PodTemplatePolicy
}

// DefaultControllerNamespace is where the manifests install the controller.
const DefaultControllerNamespace = "nats-system"

// RunningServer is one server's existing objects.
type RunningServer struct {
	Ordinal int32
	// Config is its ConfigMap's ConfigKey entry; nil without a ConfigMap.
	Config []byte
	// ConfigMap is its ConfigMap, when the caller has it: its data and
	// labels are compared whole with the rendered one to say whether the
	// server's objects change (FreshSystemUser); without it Config alone is.
	ConfigMap *corev1.ConfigMap
	// StatefulSet is its StatefulSet; nil without one.
	StatefulSet *appsv1.StatefulSet
}

// Output is every object of the cluster, ready to apply.
type Output struct {
	// Revision is the cluster's target config revision (10 hex characters):
	// the revision every server carries when they all carry the same one (a
	// single server, or servers an older release wrote), else a digest of
	// the servers' revisions in ordinal order. It changes with any server's
	// config or template; status.config.revision and
	// status.rollout.targetRevision name it.
	Revision string
	// Servers in ordinal order.
	Servers []Server
	// ClientService is "<name>" on the client port.
	ClientService *corev1.Service
	// HeadlessService is "<name>-headless" with every port.
	HeadlessService *corev1.Service
	// PDB is "<name>" with maxUnavailable 1.
	PDB *policyv1.PodDisruptionBudget
	// NetworkPolicy is "<name>"; nil with spec.networkPolicy.enabled false.
	NetworkPolicy *networkingv1.NetworkPolicy
	// PodMonitor is "<name>" (prometheus-operator's); nil with
	// spec.metrics.enabled false.
	PodMonitor *unstructured.Unstructured
	// Auth is the auth mode every server runs with.
	Auth AuthMode
	// FreshSystemUser says Input.FreshSystemUser was rendered: its Secret
	// must be created before any object is written.
	FreshSystemUser bool
	// TrustExpiring are the JWTs of the trust that expire within
	// TrustExpiresWithin of Input.Now, e.g. "NatsAccountTrust demo-app:
	// spec.jwt expires at 2026-12-08T00:00:00Z, in 96h0m0s: issue a new one
	// before then".
	TrustExpiring []string
}

// Server is one server's objects.
type Server struct {
	// Name is the server name, e.g. demo-0: server_name, StatefulSet name.
	Name    string
	Ordinal int32
	// Revision is the server's own config revision (10 hex characters): a
	// digest of its nats.conf without the revision and of its template
	// revision, or the revision its existing objects carry when they equal
	// these apart from the revisions. It is written in its nats.conf
	// (server_metadata.config_revision, what the server reports) and, as the
	// config the pod is restarted for, in its pod template. A change of
	// another server (a server added by a scale-up) leaves it alone.
	Revision string
	// Config is nats.conf (JSON), the revision included.
	Config []byte
	// Facts are the facts of Config the planner classifies.
	Facts Facts
	// ConfigMap holds Config under ConfigKey.
	ConfigMap *corev1.ConfigMap
	// StatefulSet runs the server, both revision annotations included in its
	// pod template, and the cluster's revision as AnnotationCreatedFor (kept
	// from its creation: steps write the template and labels only).
	StatefulSet *appsv1.StatefulSet
	// TemplateRevision (10 hex characters) is the digest of the StatefulSet
	// spec without the revision annotations, written in the pod template as
	// AnnotationTemplateRevision; TemplateRevisionOf reads it back.
	TemplateRevision string
	// Running is what the server's existing objects run, read back as the
	// planner classifies it; nil when it has no StatefulSet.
	Running *Running
	// configDigest is a digest of Config without the revision.
	configDigest string
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

// Render renders every object of in.Cluster, and reads back what its
// servers' existing objects run (Server.Running). A trust that fails
// validation gives a *TrustError; a spec that fails a check the CRD cannot
// make gives a *SpecError; a spec it cannot render gives another error. On
// error nothing is returned.
func Render(in Input) (*Output, error) {
	fresh := in.FreshSystemUser
	in.FreshSystemUser = nil
	out, err := renderObjects(in)
	if err != nil {
		return nil, err
	}
	if fresh != nil && in.SystemUser == nil && in.Cluster.Spec.Auth == nil && (!anyObjects(in.Running) || objectsChange(out, in.Running)) {
		in.SystemUser = fresh
		if out, err = renderObjects(in); err != nil {
			return nil, err
		}
		out.FreshSystemUser = true
	}
	readRunning(out, in.Running)
	return out, nil
}

// renderObjects renders every object of in.Cluster (Render without the
// FreshSystemUser choice and Server.Running).
func renderObjects(in Input) (*Output, error) {
	nc := in.Cluster
	if nc == nil {
		return nil, errors.New("render: no NatsCluster")
	}
	if nc.Name == "" || nc.Namespace == "" {
		return nil, errors.New("render: the NatsCluster has no name or namespace")
	}
	if err := validateStored(nc); err != nil {
		return nil, err
	}
	if err := validateSpec(&nc.Spec); err != nil {
		return nil, err
	}

	var trust *validTrust
	var auth AuthMode
	var expiring []string
	if nc.Spec.Auth != nil {
		var err error
		if trust, err = validateTrust(nc.Spec.Auth, in.Trust, in.Now); err != nil {
			return nil, err
		}
		auth = AuthMode{Operator: trust.operatorKey, SystemAccount: trust.systemAccount}
		expiring = trust.expiring
	} else if in.Trust != nil {
		return nil, errors.New("render: a trust was given but spec.auth is absent")
	}

	shared, err := newSharedConfig(nc, trust, in.SystemUser, in.TLS)
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
		NetworkPolicy:   NetworkPolicy(nc, cmp.Or(in.ControllerNamespace, DefaultControllerNamespace)),
		PodMonitor:      PodMonitor(nc),
		TrustExpiring:   expiring,
		Auth:            auth,
	}

	leafCredentials := LeafCredentialsProjected(nc, in.Running)
	// First pass: everything without the revisions.
	for i := range n {
		c := shared.server(nc, i, operatorJWT)
		cfg, err := marshalConfig(c)
		if err != nil {
			return nil, fmt.Errorf("render: encoding the config of %s: %w", ServerName(nc.Name, i), err)
		}
		sts, err := statefulSet(nc, i, "", in.TLS, leafCredentials, in.PodTemplatePolicy)
		if err != nil {
			return nil, err
		}
		tmplRev, err := templateDigest(claimsOfRunning(&sts.Spec, in.Running, i))
		if err != nil {
			return nil, fmt.Errorf("render: encoding the StatefulSet of %s: %w", ServerName(nc.Name, i), err)
		}
		out.Servers[i] = Server{
			Name:             ServerName(nc.Name, i),
			Ordinal:          i,
			Revision:         serverRevision(cfg, tmplRev),
			Config:           cfg,
			Facts:            withRoutesCA(factsOf(c, nc.Spec.Version, auth.Operator), in.TLS.Routes),
			StatefulSet:      sts,
			TemplateRevision: tmplRev,
			configDigest:     digest(cfg),
		}
	}
	keepRevisions(out.Servers, in.Running)
	out.Revision = clusterRevision(out.Servers)

	// Second pass: insert the revisions.
	for i := range out.Servers {
		s := &out.Servers[i]
		cfg, err := insertRevision(s.Config, s.Revision)
		if err != nil {
			return nil, fmt.Errorf("render: config of %s: %w", s.Name, err)
		}
		s.Config = cfg
		s.ConfigMap = configMap(nc, s.Ordinal, cfg)
		if s.Facts.RoutesCA != "" {
			s.ConfigMap.Annotations = map[string]string{clusterv1beta1.AnnotationRoutesCA: s.Facts.RoutesCA}
		}
		s.StatefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision] = s.Revision
		s.StatefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationTemplateRevision] = s.TemplateRevision
		s.StatefulSet.Annotations = map[string]string{clusterv1beta1.AnnotationCreatedFor: out.Revision}
	}
	return out, nil
}

// serverRevision is a server's config revision: a digest of its config
// without the revision and of its template revision.
func serverRevision(cfg []byte, templateRevision string) string {
	h := sha256.New()
	writeFramed(h, cfg)
	writeFramed(h, []byte(templateRevision))
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// clusterRevision is the revision every server carries when they all carry
// the same, else a digest of the servers' revisions in ordinal order.
func clusterRevision(servers []Server) string {
	same := true
	for _, s := range servers {
		same = same && s.Revision == servers[0].Revision
	}
	if same {
		return servers[0].Revision
	}
	h := sha256.New()
	for _, s := range servers {
		writeFramed(h, []byte(s.Revision))
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// keepRevisions keeps, for each server whose existing objects equal the
// rendered ones apart from the revisions, the revision they carry: the
// server runs its target already, under a name an older release may have
// computed otherwise. The server must have both objects, the same config
// revision in its config and as the config its pod was restarted for, and
// the template revision rendered now.
func keepRevisions(servers []Server, running []RunningServer) {
	for _, r := range running {
		if r.Ordinal < 0 || int(r.Ordinal) >= len(servers) || r.Config == nil || r.StatefulSet == nil {
			continue
		}
		target := &servers[r.Ordinal]
		rc, err := ReadConfig(r.Config, target.Facts.Version)
		if err != nil || rc.Revision == "" || rc.digest != target.configDigest {
			continue
		}
		if r.StatefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision] != rc.Revision ||
			TemplateRevisionOf(r.StatefulSet) != target.TemplateRevision {
			continue
		}
		target.Revision = rc.Revision
	}
}

// TemplateRevisionOf is the template revision of an existing StatefulSet: its
// pod template's AnnotationTemplateRevision, or, for a StatefulSet written
// before that annotation existed, the digest of its spec computed as Render
// computes it. "" for a StatefulSet whose spec cannot be encoded.
func TemplateRevisionOf(sts *appsv1.StatefulSet) string {
	if rev, ok := sts.Spec.Template.Annotations[clusterv1beta1.AnnotationTemplateRevision]; ok {
		return rev
	}
	rev, err := templateDigest(&sts.Spec)
	if err != nil {
		return ""
	}
	return rev
}

// claimsOfRunning is the spec whose digest is a server's template revision:
// for a server whose StatefulSet exists, with that StatefulSet's claim
// templates, which no step can change (they are immutable). A claim
// template change is applied by growing the claims or replacing the server
// (pkg/rollout: claims.go, replace.go), never by a restart, so it must not
// change the template revision. spec is not modified.
func claimsOfRunning(spec *appsv1.StatefulSetSpec, running []RunningServer, ordinal int32) *appsv1.StatefulSetSpec {
	for _, r := range running {
		if r.Ordinal != ordinal || r.StatefulSet == nil || SameClaimTemplates(r.StatefulSet.Spec.VolumeClaimTemplates, spec.VolumeClaimTemplates) {
			continue
		}
		c := *spec
		c.VolumeClaimTemplates = withoutTypeMeta(r.StatefulSet.Spec.VolumeClaimTemplates)
		return &c
	}
	return spec
}

// SameClaimTemplates says whether two StatefulSets' claim templates ask for
// the same claims: their metadata and spec, not their apiVersion and kind
// (which an API server may fill in a template and a StatefulSet read
// through another client or decoder may lack: measured, the namespaced
// install's informers saw them where the cluster-wide one did not) nor their
// status.
func SameClaimTemplates(a, b []corev1.PersistentVolumeClaim) bool {
	a, b = withoutTypeMeta(a), withoutTypeMeta(b)
	for _, claims := range [][]corev1.PersistentVolumeClaim{a, b} {
		for i := range claims {
			claims[i].Status = corev1.PersistentVolumeClaimStatus{}
		}
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// withoutTypeMeta is a copy of claims without apiVersion and kind, as
// render makes them; claims is not modified.
func withoutTypeMeta(claims []corev1.PersistentVolumeClaim) []corev1.PersistentVolumeClaim {
	if claims == nil {
		return nil
	}
	out := make([]corev1.PersistentVolumeClaim, len(claims))
	for i := range claims {
		claims[i].DeepCopyInto(&out[i])
		out[i].TypeMeta = metav1.TypeMeta{}
	}
	return out
}

// templateDigest is the digest of a StatefulSet spec without the revision
// annotations. spec is not modified.
func templateDigest(spec *appsv1.StatefulSetSpec) (string, error) {
	c := spec.DeepCopy()
	c.UpdateStrategy = DigestedStrategy()
	delete(c.Template.Annotations, clusterv1beta1.AnnotationConfigRevision)
	delete(c.Template.Annotations, clusterv1beta1.AnnotationTemplateRevision)
	var buf bytes.Buffer
	if err := encodeCanonicalSpec(&buf, c); err != nil {
		return "", err
	}
	return digest(buf.Bytes()), nil
}

// DigestedStrategy is the update strategy a template revision is computed
// with, whatever the StatefulSet carries: the RollingUpdate every release
// before OnDelete wrote. The strategy says who restarts a pod, not what it
// runs, so it changes no revision: the controller that brought OnDelete
// restarts no server for it, and writes it with a server's next template.
func DigestedStrategy() appsv1.StatefulSetUpdateStrategy {
	return appsv1.StatefulSetUpdateStrategy{
		Type:          appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0)), MaxUnavailable: ptr(intstr.FromInt32(1))},
	}
}

// insertRevision fills the empty revision of a config rendered without one.
func insertRevision(cfg []byte, rev string) ([]byte, error) {
	return insertRevisionAt(cfg, "", rev)
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
