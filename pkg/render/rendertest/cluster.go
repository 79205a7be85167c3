package rendertest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// DefaultVersion is the nats-server version NewCluster uses.
const DefaultVersion = "2.15.2"

// ClusterOption changes the NatsCluster NewCluster builds.
type ClusterOption func(*clusterv1beta1.NatsCluster)

// NewCluster builds a NatsCluster of 3 servers at DefaultVersion without
// JetStream or auth, with uid "uid-<name>", changed by opts in order.
func NewCluster(namespace, name string, opts ...ClusterOption) *clusterv1beta1.NatsCluster {
	nc := &clusterv1beta1.NatsCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1beta1.SchemeGroupVersion.String(), Kind: "NatsCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  namespace,
			Name:       name,
			UID:        types.UID("uid-" + name),
			Generation: 1,
		},
		Spec: clusterv1beta1.NatsClusterSpec{
			Version:  DefaultVersion,
			Replicas: 3,
			Image:    clusterv1beta1.ImageSpec{Repository: "nats"},
		},
	}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

// Replicas sets spec.replicas.
func Replicas(n int32) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) { nc.Spec.Replicas = n }
}

// Version sets spec.version.
func Version(v string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) { nc.Spec.Version = v }
}

// Image sets spec.image.
func Image(repository, digest string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.Image = clusterv1beta1.ImageSpec{Repository: repository, Digest: digest}
	}
}

// MemoryLimit sets resources.limits.memory (and the same request).
func MemoryLimit(q string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		r := &nc.Spec.Resources
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Limits[corev1.ResourceMemory] = resource.MustParse(q)
		r.Requests[corev1.ResourceMemory] = resource.MustParse(q)
	}
}

// CPURequest sets resources.requests.cpu.
func CPURequest(q string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		r := &nc.Spec.Resources
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	}
}

// JetStream turns JetStream on (store on an emptyDir).
func JetStream() ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		if nc.Spec.JetStream == nil {
			nc.Spec.JetStream = &clusterv1beta1.JetStreamSpec{}
		}
	}
}

// Domain turns JetStream on with this domain.
func Domain(d string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		JetStream()(nc)
		nc.Spec.JetStream.Domain = d
	}
}

// Claim turns JetStream on with a ReadWriteOnce claim of this size (and the
// storage class, if not "").
func Claim(size, storageClass string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		JetStream()(nc)
		vct := &clusterv1beta1.VolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
				},
			},
		}
		if storageClass != "" {
			vct.Spec.StorageClassName = &storageClass
		}
		nc.Spec.JetStream.VolumeClaimTemplate = vct
	}
}

// JetStreamLimits turns JetStream on with explicit limits ("" leaves one
// unset).
func JetStreamLimits(maxMemory, maxFile string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		JetStream()(nc)
		l := &clusterv1beta1.JetStreamLimits{}
		if maxMemory != "" {
			q := resource.MustParse(maxMemory)
			l.MaxMemoryStore = &q
		}
		if maxFile != "" {
			q := resource.MustParse(maxFile)
			l.MaxFileStore = &q
		}
		nc.Spec.JetStream.Limits = l
	}
}

// ServerTag adds a server tag.
func ServerTag(key, value string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		if nc.Spec.ServerTags == nil {
			nc.Spec.ServerTags = map[string]string{}
		}
		nc.Spec.ServerTags[key] = value
	}
}

// Auth turns operator mode on with this NatsOperatorTrust and these
// NatsAccountTrusts, the Full resolver and system credentials in the Secret
// "<cluster>-sys" key user.creds.
func Auth(trustName string, accountTrusts ...string) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		a := &clusterv1beta1.AuthSpec{
			TrustRef: clusterv1beta1.LocalObjectReference{Name: trustName},
			SystemCredentials: &clusterv1beta1.SystemCredentials{SecretKeyRef: clusterv1beta1.SecretKeySelector{
				Name: nc.Name + "-sys", Key: "user.creds",
			}},
			Resolver: clusterv1beta1.ResolverFull,
		}
		for _, n := range accountTrusts {
			a.AccountTrustRefs = append(a.AccountTrustRefs, clusterv1beta1.LocalObjectReference{Name: n})
		}
		nc.Spec.Auth = a
	}
}

// Resolver sets spec.auth.resolver (with Auth applied first).
func Resolver(r clusterv1beta1.ResolverType) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) { nc.Spec.Auth.Resolver = r }
}

// LameDuck sets spec.lameDuck: duration and gracePeriod as Go durations
// ("30s", "1s"); "" leaves one unset (its default).
func LameDuck(duration, gracePeriod string) ClusterOption {
	parse := func(s string) *metav1.Duration {
		if s == "" {
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			panic("rendertest.LameDuck: " + err.Error())
		}
		return &metav1.Duration{Duration: d}
	}
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.LameDuck = &clusterv1beta1.LameDuckSpec{Duration: parse(duration), GracePeriod: parse(gracePeriod)}
	}
}

// Gateway gives the cluster spec.gateway with these remotes (none: it only
// listens), replacing any it had, without TLS (insecure: the renderer's
// tests have no route TLS; a test of gateway TLS sets tls and clears
// insecure).
func Gateway(remotes ...clusterv1beta1.GatewayRemote) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.Gateway = &clusterv1beta1.GatewaySpec{Remotes: remotes, Insecure: true}
	}
}

// GatewayTo is a gateway remote naming a NatsCluster by reference, its
// gateway name the NatsCluster's name.
func GatewayTo(namespace, name string) clusterv1beta1.GatewayRemote {
	return clusterv1beta1.GatewayRemote{Name: name, ClusterRef: &clusterv1beta1.NatsClusterReference{Namespace: namespace, Name: name}}
}

// LeafNodes gives the cluster spec.leafnodes: accepting leaf connections
// (insecure: without spec.auth) or not, and these remotes.
func LeafNodes(accept bool, remotes ...clusterv1beta1.LeafNodeRemote) ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.LeafNodes = &clusterv1beta1.LeafNodesSpec{Accept: accept, Insecure: accept, Remotes: remotes}
	}
}
