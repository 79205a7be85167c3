package render_test

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// genCluster makes a random NatsCluster from r.
func genCluster(r *rand.Rand, withAuth bool) *clusterv1beta1.NatsCluster {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	opts := []rt.ClusterOption{
		rt.Replicas(int32(1 + r.IntN(7))),
		rt.Version(pick("2.10.29", "2.11.9", "2.12.1", "2.14.5", "2.15.2")),
	}
	if r.IntN(4) == 0 {
		opts = append(opts, rt.Image(pick("nats", "registry.example/nats"), pick("", "sha256:"+sixtyFour("b"))))
	}
	if r.IntN(2) == 0 {
		opts = append(opts, rt.MemoryLimit(pick("256Mi", "1Gi", "1500M", "3Gi")))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, rt.CPURequest(pick("100m", "1", "2")))
	}
	switch r.IntN(4) {
	case 1:
		opts = append(opts, rt.JetStream())
	case 2:
		opts = append(opts, rt.Claim(pick("1Gi", "10Gi", "100G"), pick("", "fast")))
	case 3:
		opts = append(opts, rt.Claim("5Gi", ""), rt.JetStreamLimits(pick("", "64Mi"), pick("", "1G")))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, rt.Domain(pick("", "hub", "leaf")))
	}
	for range r.IntN(4) {
		opts = append(opts, rt.ServerTag(pick("region", "az", "disk", "team"), pick("a", "b", "c:d", "eu-west-1")))
	}
	if withAuth {
		refs := []string{"orders", "events"}[:r.IntN(3)]
		opts = append(opts, rt.Auth("trust", refs...))
		if r.IntN(2) == 0 {
			opts = append(opts, rt.Resolver(clusterv1beta1.ResolverCache))
		}
	}
	nc := rt.NewCluster("ns", pick("demo", "nats"), opts...)
	if nc.Spec.JetStream != nil && nc.Spec.Replicas < 2 {
		nc.Spec.Replicas = 2 // the CRD refuses one server with JetStream
	}
	return nc
}

// rebuildMaps copies every map of the spec with its keys inserted in
// reverse order, so nothing may depend on how maps were built.
func rebuildMaps(nc *clusterv1beta1.NatsCluster) *clusterv1beta1.NatsCluster {
	nc = nc.DeepCopy()
	rev := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		keys := slices.Sorted(maps.Keys(m))
		slices.Reverse(keys)
		out := make(map[string]string, len(m))
		for _, k := range keys {
			out[k] = m[k]
		}
		return out
	}
	nc.Spec.ServerTags = rev(nc.Spec.ServerTags)
	revList := func(l corev1.ResourceList) corev1.ResourceList {
		if l == nil {
			return nil
		}
		keys := slices.Sorted(maps.Keys(l))
		slices.Reverse(keys)
		out := corev1.ResourceList{}
		for _, k := range keys {
			out[k] = l[k]
		}
		return out
	}
	nc.Spec.Resources.Limits = revList(nc.Spec.Resources.Limits)
	nc.Spec.Resources.Requests = revList(nc.Spec.Resources.Requests)
	return nc
}

// sameObjects reports whether two outputs render the same objects apart
// from the revision: byte-equal configs with the revision taken out, and
// StatefulSet specs without the revision annotation that Kubernetes holds
// equal. It is computed apart from the code that hashes the revision.
func sameObjects(a, b *render.Output) bool {
	if len(a.Servers) != len(b.Servers) {
		return false
	}
	for i := range a.Servers {
		ca := bytes.Replace(a.Servers[i].Config, []byte(a.Revision), nil, 1)
		cb := bytes.Replace(b.Servers[i].Config, []byte(b.Revision), nil, 1)
		if !bytes.Equal(ca, cb) {
			return false
		}
		sa, sb := a.Servers[i].StatefulSet.Spec.DeepCopy(), b.Servers[i].StatefulSet.Spec.DeepCopy()
		delete(sa.Template.Annotations, clusterv1beta1.AnnotationConfigRevision)
		delete(sb.Template.Annotations, clusterv1beta1.AnnotationConfigRevision)
		if !apiequality.Semantic.DeepEqual(sa, sb) {
			return false
		}
	}
	return true
}

type mutation struct {
	name string
	// changes is whether the mutation changes a rendered object.
	changes bool
	apply   func(nc *clusterv1beta1.NatsCluster, tr *render.Trust)
}

var mutations = []mutation{
	{"bump the patch version", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { nc.Spec.Version += "-rc.1" }},
	{"add a server", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { nc.Spec.Replicas++ }},
	{"change the image repository", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { nc.Spec.Image.Repository = "mirror/nats" }},
	{"pin a different digest", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		nc.Spec.Image.Digest = "sha256:" + sixtyFour("c")
	}},
	{"set another memory limit", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		rt.MemoryLimit("777Mi")(nc)
	}},
	{"add a server tag", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { rt.ServerTag("zzz", "new")(nc) }},
	{"change the namespace", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { nc.Namespace = "other" }},
	{"toggle JetStream", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		if nc.Spec.JetStream == nil {
			rt.JetStream()(nc)
		} else {
			nc.Spec.JetStream = nil
		}
	}},
	{"set a JetStream domain", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { rt.Domain("changed")(nc) }},
	{"set a file store limit", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { rt.JetStreamLimits("", "3333Mi")(nc) }},
	{"add a label to the claim template", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		rt.Claim("7Gi", "")(nc)
		nc.Spec.JetStream.VolumeClaimTemplate.Metadata.Labels = map[string]clusterv1beta1.LabelValue{"backup": "yes"}
	}},
	{"toggle auth", true, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		if nc.Spec.Auth == nil {
			rt.Auth("trust")(nc)
		} else {
			nc.Spec.Auth = nil
		}
	}},
	// Changes that render the same objects.
	{"write the memory limit in other units", false, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		if q, ok := nc.Spec.Resources.Limits[corev1.ResourceMemory]; ok {
			nc.Spec.Resources.Limits[corev1.ResourceMemory] = *resource.NewQuantity(q.Value(), resource.DecimalSI)
		}
	}},
	{"pause the rollout", false, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		nc.Spec.Rollout.Paused = !nc.Spec.Rollout.Paused
	}},
	{"recreate with another uid", false, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) { nc.UID = types.UID("another") }},
	{"bump the generation and annotate", false, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		nc.Generation++
		nc.Annotations = map[string]string{clusterv1beta1.AnnotationForceStep: "demo-0"}
	}},
	{"write a status", false, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		nc.Status.ReadyReplicas = 2
		nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: "0123456789"}
	}},
	{"rename the trust objects", false, func(nc *clusterv1beta1.NatsCluster, _ *render.Trust) {
		if nc.Spec.Auth != nil {
			nc.Spec.Auth.TrustRef.Name = "renamed"
			nc.Spec.Auth.SystemCredentials = nil
		}
	}},
	{"list the account trusts in another order", false, func(nc *clusterv1beta1.NatsCluster, tr *render.Trust) {
		if nc.Spec.Auth != nil {
			slices.Reverse(nc.Spec.Auth.AccountTrustRefs)
		}
		if tr != nil {
			slices.Reverse(tr.Accounts)
		}
	}},
}

func TestRevisionProperties(t *testing.T) {
	const specs = 1200
	fixture := rt.NewTrust(t, rt.WithAccounts("orders", "events"))
	trustFor := func(nc *clusterv1beta1.NatsCluster) *render.Trust {
		if nc.Spec.Auth == nil {
			return nil
		}
		tr := fixture.Trust()
		var refs []string
		for _, r := range nc.Spec.Auth.AccountTrustRefs {
			refs = append(refs, r.Name)
		}
		tr.Accounts = slices.DeleteFunc(tr.Accounts, func(a render.AccountTrust) bool { return !slices.Contains(refs, a.Name) })
		return tr
	}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]*render.Output{}
	var changed, unchanged int
	for i := range specs {
		nc := genCluster(r, r.IntN(3) == 0)
		a, err := render.Render(render.Input{Cluster: nc, Trust: trustFor(nc)})
		if err != nil {
			t.Fatalf("spec %d: Render: %v", i, err)
		}
		if len(a.Revision) != 10 {
			t.Fatalf("spec %d: revision %q is not 10 characters", i, a.Revision)
		}

		// The same spec, its maps rebuilt, renders the same bytes.
		b, err := render.Render(render.Input{Cluster: rebuildMaps(nc), Trust: trustFor(nc)})
		if err != nil {
			t.Fatalf("spec %d: Render again: %v", i, err)
		}
		if a.Revision != b.Revision {
			t.Fatalf("spec %d: revision %s, then %s for the same spec", i, a.Revision, b.Revision)
		}
		for j := range a.Servers {
			if !bytes.Equal(a.Servers[j].Config, b.Servers[j].Config) {
				t.Fatalf("spec %d: %s config differs between two renders", i, a.Servers[j].Name)
			}
		}

		// Different rendered objects never share a revision.
		if prev, ok := seen[a.Revision]; ok && !sameObjects(prev, a) {
			t.Fatalf("spec %d: revision %s shared by different objects", i, a.Revision)
		}
		seen[a.Revision] = a

		// A mutation changes the revision exactly when it changes an object.
		m := mutations[r.IntN(len(mutations))]
		mc := nc.DeepCopy()
		mtr := trustFor(nc)
		m.apply(mc, mtr)
		if mc.Spec.JetStream != nil && mc.Spec.Replicas < 2 {
			mc.Spec.Replicas = 2 // the CRD refuses one server with JetStream
		}
		if mc.Spec.Auth != nil && nc.Spec.Auth == nil {
			mtr = trustFor(mc)
		}
		if mc.Spec.Auth == nil {
			mtr = nil
		}
		c, err := render.Render(render.Input{Cluster: mc, Trust: mtr})
		if err != nil {
			t.Fatalf("spec %d, %s: Render: %v", i, m.name, err)
		}
		objectsChanged := !sameObjects(a, c)
		if revChanged := a.Revision != c.Revision; revChanged != objectsChanged {
			t.Fatalf("spec %d, %s: revision changed %v (%s -> %s) but objects changed %v", i, m.name, revChanged, a.Revision, c.Revision, objectsChanged)
		}
		if m.changes && !objectsChanged {
			t.Fatalf("spec %d, %s: expected the objects to change", i, m.name)
		}
		if !m.changes && objectsChanged {
			t.Fatalf("spec %d, %s: expected the same objects", i, m.name)
		}
		if objectsChanged {
			changed++
		} else {
			unchanged++
		}
	}
	t.Logf("%d specs, %d distinct revisions; %d mutations changed the objects and the revision, %d changed neither", specs, len(seen), changed, unchanged)
	if changed < specs/3 || unchanged < specs/10 {
		t.Errorf("mutations poorly spread: %d changed, %d unchanged", changed, unchanged)
	}
}

func BenchmarkRenderFiveServersOperatorMode(b *testing.B) {
	f := rt.NewTrust(b, rt.WithAccounts("orders", "events"))
	nc := rt.NewCluster("ns", "demo", rt.Replicas(5), rt.Claim("10Gi", ""), rt.MemoryLimit("2Gi"),
		rt.ServerTag("region", "eu"), rt.Auth("trust", "orders", "events"))
	in := render.Input{Cluster: nc, Trust: f.Trust()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
