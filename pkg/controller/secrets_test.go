package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// The reader fetches a Secret's values once per resourceVersion, by name,
// and never another Secret's; the metadata it is told of carries no
// annotations.
func TestSecretsAreReadByNameOncePerResourceVersion(t *testing.T) {
	named := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "named", ResourceVersion: "1"}, Data: map[string][]byte{"k": []byte("v1")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", ResourceVersion: "1",
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"c2VjcmV0"}}`}}}
	kube := k8sfake.NewClientset(named, other)
	inf := metadatainformer.NewSharedInformerFactory(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), 0).ForResource(SecretsResource)
	meta := func(s *corev1.Secret) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: *s.ObjectMeta.DeepCopy()}
		stripped, err := StripSecretMetadata(m)
		if err != nil {
			t.Fatal(err)
		}
		return stripped.(*metav1.PartialObjectMetadata)
	}
	idx := inf.Informer().GetIndexer()
	for _, s := range []*corev1.Secret{named, other} {
		if err := idx.Add(meta(s)); err != nil {
			t.Fatal(err)
		}
	}
	if m := meta(other); m.Annotations != nil {
		t.Errorf("the cached metadata keeps annotations %v", m.Annotations)
	}
	r := newSecretReader(kube, inf.Lister())
	gets := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
				if name := a.(interface{ GetName() string }).GetName(); name != "named" {
					t.Errorf("read Secret %s, which nobody named", name)
				}
				n++
			}
		}
		return n
	}
	for range 3 {
		s, err := r.Secrets("ns").Get("named")
		if err != nil || string(s.Data["k"]) != "v1" {
			t.Fatalf("Get: %v %v", s, err)
		}
	}
	if n := gets(); n != 1 {
		t.Errorf("%d reads of the same resourceVersion, want 1", n)
	}
	// A new resourceVersion in the metadata: read again.
	changed := named.DeepCopy()
	changed.ResourceVersion, changed.Data = "2", map[string][]byte{"k": []byte("v2")}
	if _, err := kube.CoreV1().Secrets("ns").Update(t.Context(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := idx.Update(meta(changed)); err != nil {
		t.Fatal(err)
	}
	if s, err := r.Secrets("ns").Get("named"); err != nil || string(s.Data["k"]) != "v2" {
		t.Fatalf("after the change: %v %v", s, err)
	}
	if n := gets(); n != 2 {
		t.Errorf("%d reads after a change, want 2", n)
	}
	// A Secret the metadata does not know is NotFound without a read.
	if _, err := r.Secrets("ns").Get("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing: %v, want NotFound", err)
	}
	r.forget(meta(changed))
	if r.held() != 0 || gets() != 2 {
		t.Errorf("after the delete: %d held, %d reads", r.held(), gets())
	}

	// Values no sync reads any more (no cluster names the Secret) are
	// dropped once unread for secretValuesUnread; one still read stays.
	now := time.Now()
	r.now = func() time.Time { return now }
	if err := idx.Add(meta(other)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"named", "other"} {
		if _, err := r.Secrets("ns").Get(name); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(secretValuesUnread / 2)
	if _, err := r.Secrets("ns").Get("named"); err != nil {
		t.Fatal(err)
	}
	if r.held() != 2 {
		t.Errorf("%d held after half the time, want 2", r.held())
	}
	now = now.Add(secretValuesUnread/2 + time.Second)
	if _, err := r.Secrets("ns").Get("named"); err != nil {
		t.Fatal(err)
	}
	if r.held() != 1 {
		t.Errorf("%d held once other went unread for %s, want 1 (named, still read)", r.held(), secretValuesUnread)
	}
}

// A change of a named Secret, as the metadata informer reports it,
// re-queues the clusters that name it (and no other).
func TestSecretMetadataRequeuesTheClustersNamingIt(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-client-tls"}}
	named := rt.NewCluster("ns", "demo")
	named.Spec.TLS = &clusterv1beta1.ClientTLS{Secret: &clusterv1beta1.TLSSecretRef{Name: "demo-client-tls"}}
	if !refersTo(named, m, m.Name) {
		t.Error("a cluster naming the Secret in spec.tls is not re-queued by its metadata")
	}
	if refersTo(rt.NewCluster("ns", "other"), m, m.Name) {
		t.Error("a cluster naming no Secret is re-queued")
	}
	creds := rt.NewCluster("ns", "auth", rt.Auth("demo"))
	creds.Spec.Auth.SystemCredentials = &clusterv1beta1.SystemCredentials{SecretKeyRef: clusterv1beta1.SecretKeySelector{Name: "sys"}}
	if !refersTo(creds, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sys"}}, "sys") {
		t.Error("a cluster naming the Secret as systemCredentials is not re-queued by its metadata")
	}
}
