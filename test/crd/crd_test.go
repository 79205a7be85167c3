package crd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/test/testenv"
)

var (
	env *testenv.Env
	// natsClusters is the NatsCluster resource.
	natsClusters = schema.GroupVersionResource{Group: "cluster.nats-operator.io", Version: "v1beta1", Resource: "natsclusters"}
	// strict refuses unknown and duplicate fields, as kubectl apply does.
	strictCreate = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	strictUpdate = metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}
)

// TestMain runs one kube-apiserver for the package. TESTENV_CRD_DIR, when
// set, installs the CRDs of that directory instead of manifests/crds (to try
// a CRD change before it is generated).
func TestMain(m *testing.M) {
	var stop func()
	var err error
	env, stop, err = testenv.StartMain(testenv.Options{CRDDir: os.Getenv("TESTENV_CRD_DIR")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func TestEveryExampleIsAccepted(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "manifests", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests in manifests/examples")
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t, "example")
			objs, err := testenv.ReadManifests(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) == 0 {
				t.Fatalf("%s holds no objects", file)
			}
			for _, obj := range objs {
				gvk := obj.GroupVersionKind()
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
				}
				if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
					t.Fatalf("%s %s is not namespaced", gvk.Kind, obj.GetName())
				}
				if obj.GetNamespace() != "" {
					t.Errorf("%s %s sets namespace %q; examples leave it to kubectl apply -n", gvk.Kind, obj.GetName(), obj.GetNamespace())
				}
				if _, err := dyn.Resource(mapping.Resource).Namespace(ns).Create(ctx, obj, strictCreate); err != nil {
					t.Errorf("%s %s refused: %v", gvk.Kind, obj.GetName(), err)
				}
			}
		})
	}
}

// valid is a NatsCluster that sets every field the bad cases break.
const valid = `
apiVersion: cluster.nats-operator.io/v1beta1
kind: NatsCluster
metadata:
  name: placeholder
spec:
  version: "2.15.2"
  replicas: 3
  image:
    repository: nats
    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  resources:
    limits:
      memory: 1Gi
  serverTags:
    region: eu
  jetstream:
    domain: hub
    limits:
      maxMemoryStore: 512Mi
      maxFileStore: 10Gi
    volumeClaimTemplate:
      spec:
        accessModes: ["ReadWriteOnce"]
        resources:
          requests:
            storage: 1Gi
  auth:
    trustRef:
      name: demo
    systemCredentials:
      secretKeyRef:
        name: demo-system-creds
    resolver: Full
    accountTrustRefs:
      - name: demo-app
  gateway:
    name: demo-gw
    remotes:
      - name: west
        clusterRef:
          name: west
          namespace: other
      - name: far
        urls: ["nats://far.example.com:7222"]
  leafnodes:
    accept: true
    remotes:
      - name: hub
        clusterRef:
          name: hub
          namespace: other
        credentials:
          name: hub-creds
      - name: cloud
        urls: ["tls://connect.example.com:7422"]
        account: ACCOUNTKEY
`

// edit changes a NatsCluster object.
type edit func(obj map[string]any)

// set sets the field at the dot-separated path (below the object root).
func set(path string, value any) edit {
	return func(obj map[string]any) {
		if err := unstructured.SetNestedField(obj, value, strings.Split(path, ".")...); err != nil {
			panic(err)
		}
	}
}

// remove deletes the field at the dot-separated path.
func remove(path string) edit {
	return func(obj map[string]any) { unstructured.RemoveNestedField(obj, strings.Split(path, ".")...) }
}

func newCluster(name string, edits ...edit) *unstructured.Unstructured {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(valid), &obj); err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetName(name)
	for _, e := range edits {
		e(u.Object)
	}
	return u
}

// badCluster is a NatsCluster the CRD refuses.
type badCluster struct {
	name string
	// update, if set, is applied to an accepted valid NatsCluster;
	// otherwise edits make a NatsCluster to create.
	update bool
	edits  []edit
	// field is the path the error must name.
	field string
	// reason is the status reason of the refusal.
	reason metav1.StatusReason
}

// badClusters are the NatsClusters the CRD refuses, each naming the field.
var badClusters = []badCluster{
	{name: "a version that is not semver is refused", edits: []edit{set("spec.version", "2.15")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "a version with a leading v is refused", edits: []edit{set("spec.version", "v2.15.2")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "an empty version is refused", edits: []edit{set("spec.version", "")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "a missing version is refused", edits: []edit{remove("spec.version")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "an update moving the minor version up by two is refused", update: true, edits: []edit{set("spec.version", "2.17.0")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "an update moving the minor version down by two is refused", update: true, edits: []edit{set("spec.version", "2.13.9")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "an update changing the major version is refused", update: true, edits: []edit{set("spec.version", "3.15.2")}, field: "spec.version", reason: metav1.StatusReasonInvalid},
	{name: "zero replicas are refused", edits: []edit{set("spec.replicas", int64(0))}, field: "spec.replicas", reason: metav1.StatusReasonInvalid},
	{name: "negative replicas are refused", edits: []edit{set("spec.replicas", int64(-1))}, field: "spec.replicas", reason: metav1.StatusReasonInvalid},
	{name: "missing replicas are refused", edits: []edit{remove("spec.replicas")}, field: "spec.replicas", reason: metav1.StatusReasonInvalid},
	{name: "one JetStream server in a supercluster is refused", edits: []edit{set("spec.replicas", int64(1)), set("spec.gateway", map[string]any{})}, field: "spec.replicas", reason: metav1.StatusReasonInvalid},
	{name: "WebSocket without spec.tls or noTLS is refused", edits: []edit{set("spec.websocket", map[string]any{"port": int64(8080)})}, field: "spec.websocket", reason: metav1.StatusReasonInvalid},
	{name: "MQTT without spec.tls or noTLS is refused", edits: []edit{set("spec.mqtt", map[string]any{})}, field: "spec.mqtt", reason: metav1.StatusReasonInvalid},
	{name: "MQTT without JetStream is refused", edits: []edit{remove("spec.jetstream"), set("spec.mqtt", map[string]any{"noTLS": true})}, field: "spec.mqtt", reason: metav1.StatusReasonInvalid},
	{name: "WebSocket on the client port is refused", edits: []edit{set("spec.websocket", map[string]any{"port": int64(4222), "noTLS": true})}, field: "spec.websocket.port", reason: metav1.StatusReasonInvalid},
	{name: "WebSocket and MQTT on one port are refused", edits: []edit{set("spec.websocket", map[string]any{"port": int64(9000), "noTLS": true}), set("spec.mqtt", map[string]any{"port": int64(9000), "noTLS": true})}, field: "spec.mqtt.port", reason: metav1.StatusReasonInvalid},
	{name: "sameOrigin with allowedOrigins is refused", edits: []edit{set("spec.websocket", map[string]any{"noTLS": true, "sameOrigin": true, "allowedOrigins": []any{"https://a.example.com"}})}, field: "spec.websocket.allowedOrigins", reason: metav1.StatusReasonInvalid},
	{name: "an allowed origin that is not a URL is refused", edits: []edit{set("spec.websocket", map[string]any{"noTLS": true, "allowedOrigins": []any{"app.example.com"}})}, field: "spec.websocket.allowedOrigins[0]", reason: metav1.StatusReasonInvalid},
	{name: "an MQTT maxAckPending of 0 is refused", edits: []edit{set("spec.mqtt", map[string]any{"noTLS": true, "maxAckPending": int64(0)})}, field: "spec.mqtt.maxAckPending", reason: metav1.StatusReasonInvalid},
	{name: "an MQTT ackWait under a second is refused", edits: []edit{set("spec.mqtt", map[string]any{"noTLS": true, "ackWait": "500ms"})}, field: "spec.mqtt.ackWait", reason: metav1.StatusReasonInvalid},
	{name: "monitoring over TLS without spec.tls is refused", edits: []edit{set("spec.monitoring", map[string]any{"tls": true})}, field: "spec.monitoring.tls", reason: metav1.StatusReasonInvalid},
	{name: "a malformed image digest is refused", edits: []edit{set("spec.image.digest", "sha256:xyz")}, field: "spec.image.digest", reason: metav1.StatusReasonInvalid},
	{name: "an image digest in upper case hex is refused", edits: []edit{set("spec.image.digest", "sha256:"+strings.Repeat("AB", 32))}, field: "spec.image.digest", reason: metav1.StatusReasonInvalid},
	{name: "a URL resolver is refused", edits: []edit{set("spec.auth.resolver", "URL")}, field: "spec.auth.resolver", reason: metav1.StatusReasonInvalid},
	{name: "auth without a trustRef is refused", edits: []edit{remove("spec.auth.trustRef")}, field: "spec.auth.trustRef", reason: metav1.StatusReasonInvalid},
	{name: "a trustRef with an empty name is refused", edits: []edit{set("spec.auth.trustRef.name", "")}, field: "spec.auth.trustRef.name", reason: metav1.StatusReasonInvalid},
	{name: "an accountTrustRef without a name is refused", edits: []edit{set("spec.auth.accountTrustRefs", []any{map[string]any{}})}, field: "spec.auth.accountTrustRefs[0].name", reason: metav1.StatusReasonInvalid},
	{name: "two accountTrustRefs with the same name are refused", edits: []edit{set("spec.auth.accountTrustRefs", []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}})}, field: "spec.auth.accountTrustRefs[1]", reason: metav1.StatusReasonInvalid},
	{name: "a systemCredentials secretKeyRef without a name is refused", edits: []edit{remove("spec.auth.systemCredentials.secretKeyRef.name")}, field: "spec.auth.systemCredentials.secretKeyRef.name", reason: metav1.StatusReasonInvalid},
	{name: "an unknown field is refused by strict field validation", edits: []edit{set("spec.foo", "bar")}, field: "spec.foo", reason: metav1.StatusReasonBadRequest},
	{name: "an unknown nested field is refused by strict field validation", edits: []edit{set("spec.jetstream.storageClass", "fast")}, field: "spec.jetstream.storageClass", reason: metav1.StatusReasonBadRequest},
	{name: "a negative maxFileStore is refused", edits: []edit{set("spec.jetstream.limits.maxFileStore", "-1Gi")}, field: "spec.jetstream.limits.maxFileStore", reason: metav1.StatusReasonInvalid},
	{name: "a negative maxFileStore given as an integer is refused", edits: []edit{set("spec.jetstream.limits.maxFileStore", int64(-1))}, field: "spec.jetstream.limits.maxFileStore", reason: metav1.StatusReasonInvalid},
	{name: "a negative maxMemoryStore is refused", edits: []edit{set("spec.jetstream.limits.maxMemoryStore", "-512Mi")}, field: "spec.jetstream.limits.maxMemoryStore", reason: metav1.StatusReasonInvalid},
	{name: "a maxFileStore that is not a quantity is refused", edits: []edit{set("spec.jetstream.limits.maxFileStore", "lots")}, field: "spec.jetstream.limits.maxFileStore", reason: metav1.StatusReasonInvalid},
	{name: "a server tag with an empty key is refused", edits: []edit{set("spec.serverTags", map[string]any{"": "eu"})}, field: "spec.serverTags", reason: metav1.StatusReasonInvalid},
	{name: "a name with a dot is refused", edits: []edit{func(o map[string]any) { o["metadata"].(map[string]any)["name"] = "demo.eu" }}, field: "metadata.name", reason: metav1.StatusReasonInvalid},
	{name: "a request larger than its limit is refused", edits: []edit{set("spec.resources.requests", map[string]any{"memory": "2Gi"})}, field: "spec.resources.requests", reason: metav1.StatusReasonInvalid},
	{name: "a negative cpu limit is refused", edits: []edit{set("spec.resources.limits", map[string]any{"cpu": "-1"})}, field: "spec.resources.limits", reason: metav1.StatusReasonInvalid},
	{name: "a resource other than cpu, memory and ephemeral-storage is refused", edits: []edit{set("spec.resources.limits", map[string]any{"nvidia.com/gpu": "1"})}, field: "spec.resources.limits", reason: metav1.StatusReasonInvalid},
	{name: "resource claims are refused", edits: []edit{set("spec.resources.claims", []any{map[string]any{"name": "gpu"}})}, field: "spec.resources", reason: metav1.StatusReasonInvalid},
	{name: "a claim template without a storage request is refused", edits: []edit{remove("spec.jetstream.volumeClaimTemplate.spec.resources")}, field: "spec.jetstream.volumeClaimTemplate.spec.resources", reason: metav1.StatusReasonInvalid},
	{name: "a Block claim is refused", edits: []edit{set("spec.jetstream.volumeClaimTemplate.spec.volumeMode", "Block")}, field: "spec.jetstream.volumeClaimTemplate.spec.volumeMode", reason: metav1.StatusReasonInvalid},
	{name: "ReadWriteOncePod with another access mode is refused", edits: []edit{set("spec.jetstream.volumeClaimTemplate.spec.accessModes", []any{"ReadWriteOncePod", "ReadWriteOnce"})}, field: "spec.jetstream.volumeClaimTemplate.spec.accessModes", reason: metav1.StatusReasonInvalid},
	{name: "a storage class that is not a DNS subdomain is refused", edits: []edit{set("spec.jetstream.volumeClaimTemplate.spec.storageClassName", "Fast SSD")}, field: "spec.jetstream.volumeClaimTemplate.spec.storageClassName", reason: metav1.StatusReasonInvalid},
	{name: "a claim label key with a space is refused", edits: []edit{set("spec.jetstream.volumeClaimTemplate.metadata.labels", map[string]any{"bad key": "x"})}, field: "spec.jetstream.volumeClaimTemplate.metadata.labels", reason: metav1.StatusReasonInvalid},
	{name: "a claim label value of 64 characters is refused", edits: []edit{set("spec.jetstream.volumeClaimTemplate.metadata.labels", map[string]any{"team": strings.Repeat("v", 64)})}, field: "spec.jetstream.volumeClaimTemplate.metadata.labels.team", reason: metav1.StatusReasonInvalid},
	{name: "a JetStream domain with a space is refused", edits: []edit{set("spec.jetstream.domain", "my hub")}, field: "spec.jetstream.domain", reason: metav1.StatusReasonInvalid},
	{name: "client TLS with both a Secret and a Certificate is refused", edits: []edit{set("spec.tls", map[string]any{
		"secret": map[string]any{"name": "demo-tls"}, "certificate": map[string]any{"issuerRef": map[string]any{"name": "ca"}}})}, field: "spec.tls", reason: metav1.StatusReasonInvalid},
	{name: "client TLS with neither a Secret nor a Certificate is refused", edits: []edit{set("spec.tls", map[string]any{"verifyClients": true})}, field: "spec.tls", reason: metav1.StatusReasonInvalid},
	{name: "a client TLS key name with a slash is refused", edits: []edit{set("spec.tls", map[string]any{"secret": map[string]any{"name": "demo-tls", "certKey": "certs/tls.crt"}})}, field: "spec.tls.secret.certKey", reason: metav1.StatusReasonInvalid},
	{name: "a client TLS Secret name in upper case is refused", edits: []edit{set("spec.tls", map[string]any{"secret": map[string]any{"name": "Demo-TLS"}})}, field: "spec.tls.secret.name", reason: metav1.StatusReasonInvalid},
	{name: "a Certificate issuer of another kind is refused", edits: []edit{set("spec.tls", map[string]any{"certificate": map[string]any{"issuerRef": map[string]any{"name": "ca", "kind": "Vault"}}})}, field: "spec.tls.certificate.issuerRef.kind", reason: metav1.StatusReasonInvalid},
	{name: "route TLS mode Secret without a Secret is refused", edits: []edit{set("spec.routes.tls", map[string]any{"mode": "Secret"})}, field: "spec.routes.tls.secret", reason: metav1.StatusReasonInvalid},
	{name: "route TLS Disabled with a Secret is refused", edits: []edit{set("spec.routes.tls", map[string]any{"mode": "Disabled", "secret": map[string]any{"name": "x"}})}, field: "spec.routes.tls.secret", reason: metav1.StatusReasonInvalid},
	{name: "an unknown route TLS mode is refused", edits: []edit{set("spec.routes.tls", map[string]any{"mode": "SelfSigned"})}, field: "spec.routes.tls.mode", reason: metav1.StatusReasonInvalid},
	{name: "a privileged sidecar is refused", edits: []edit{set("spec.podTemplate.spec.containers", []any{map[string]any{
		"name": "debug", "image": "busybox:1.37", "securityContext": map[string]any{"privileged": true}}})}, field: "spec.podTemplate.spec.containers", reason: metav1.StatusReasonInvalid},
	{name: "the nats container's ports cannot be changed", edits: []edit{set("spec.podTemplate.spec.containers", []any{map[string]any{
		"name": "nats", "ports": []any{map[string]any{"name": "client", "containerPort": int64(14222)}}}})}, field: "spec.podTemplate.spec.containers", reason: metav1.StatusReasonInvalid},
	{name: "tolerations of the wrong type are refused", edits: []edit{set("spec.podTemplate.spec.tolerations", "all")}, field: "spec.podTemplate.spec.tolerations", reason: metav1.StatusReasonInvalid},
	{name: "a pod running as root is refused", edits: []edit{set("spec.podTemplate.spec.securityContext", map[string]any{"runAsUser": int64(0)})}, field: "spec.podTemplate.spec.securityContext.runAsUser", reason: metav1.StatusReasonInvalid},
	{name: "the nats container's image cannot be set in the podTemplate", edits: []edit{set("spec.podTemplate.spec.containers", []any{map[string]any{
		"name": "nats", "image": "nats:2.14.0"}})}, field: "spec.podTemplate.spec.containers", reason: metav1.StatusReasonInvalid},
	{name: "a volume named like the controller's is refused", edits: []edit{set("spec.podTemplate.spec.volumes", []any{map[string]any{
		"name": "config", "emptyDir": map[string]any{}}})}, field: "spec.podTemplate.spec.volumes", reason: metav1.StatusReasonInvalid},
	{name: "a sidecar without an image is refused", edits: []edit{set("spec.podTemplate.spec.containers", []any{map[string]any{"name": "sidecar"}})}, field: "spec.podTemplate.spec.containers", reason: metav1.StatusReasonInvalid},
	{name: "the nats container's probe checks cannot be changed", edits: []edit{set("spec.podTemplate.spec.containers", []any{map[string]any{
		"name": "nats", "readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": int64(4222)}}}})}, field: "spec.podTemplate.spec.containers", reason: metav1.StatusReasonInvalid},
	{name: "a lame duck duration under 30s is refused", edits: []edit{set("spec.lameDuck.duration", "10s")}, field: "spec.lameDuck.duration", reason: metav1.StatusReasonInvalid},
	{name: "a lame duck duration that is not a duration is refused", edits: []edit{set("spec.lameDuck.duration", "soon")}, field: "spec.lameDuck.duration", reason: metav1.StatusReasonInvalid},
	{name: "a lame duck grace period of 0 is refused (nats-server would take its default 10s)", edits: []edit{set("spec.lameDuck.gracePeriod", "0s")}, field: "spec.lameDuck.gracePeriod", reason: metav1.StatusReasonInvalid},
	{name: "a lame duck grace period under 1s is refused", edits: []edit{set("spec.lameDuck.gracePeriod", "500ms")}, field: "spec.lameDuck.gracePeriod", reason: metav1.StatusReasonInvalid},
	{name: "a lame duck grace period as long as the default duration is refused", edits: []edit{set("spec.lameDuck.gracePeriod", "30s")}, field: "spec.lameDuck.gracePeriod", reason: metav1.StatusReasonInvalid},
	{name: "a lame duck grace period longer than the duration is refused", edits: []edit{set("spec.lameDuck", map[string]any{"duration": "40s", "gracePeriod": "1m"})}, field: "spec.lameDuck.gracePeriod", reason: metav1.StatusReasonInvalid},
	{name: "an update to a lame duck grace period as long as the duration is refused", update: true, edits: []edit{set("spec.lameDuck", map[string]any{"duration": "45s", "gracePeriod": "45s"})}, field: "spec.lameDuck.gracePeriod", reason: metav1.StatusReasonInvalid},
	{name: "a gateway remote with both clusterRef and urls is refused", edits: []edit{set("spec.gateway.remotes", []any{map[string]any{
		"name": "west", "clusterRef": map[string]any{"name": "west"}, "urls": []any{"nats://w:7222"}}})}, field: "spec.gateway.remotes[0]", reason: metav1.StatusReasonInvalid},
	{name: "a gateway remote with neither clusterRef nor urls is refused", edits: []edit{set("spec.gateway.remotes", []any{map[string]any{"name": "west"}})},
		field: "spec.gateway.remotes[0]", reason: metav1.StatusReasonInvalid},
	{name: "a gateway URL without a scheme and port is refused", edits: []edit{set("spec.gateway.remotes", []any{map[string]any{"name": "west", "urls": []any{"west.example.com"}}})},
		field: "spec.gateway.remotes[0].urls[0]", reason: metav1.StatusReasonInvalid},
	{name: "two gateway remotes of one name are refused", edits: []edit{set("spec.gateway.remotes", []any{
		map[string]any{"name": "west", "urls": []any{"nats://a:7222"}}, map[string]any{"name": "west", "urls": []any{"nats://b:7222"}}})},
		field: "spec.gateway.remotes[1]", reason: metav1.StatusReasonInvalid},
	{name: "a gateway name with a space is refused", edits: []edit{set("spec.gateway.name", "demo gw")}, field: "spec.gateway.name", reason: metav1.StatusReasonInvalid},
	{name: "a change of the gateway name is refused", update: true, edits: []edit{set("spec.gateway.name", "other")}, field: "spec.gateway.name", reason: metav1.StatusReasonInvalid},
	{name: "a leaf remote with both clusterRef and urls is refused", edits: []edit{set("spec.leafnodes.remotes", []any{map[string]any{
		"name": "hub", "clusterRef": map[string]any{"name": "hub"}, "urls": []any{"nats://h:7422"}}})}, field: "spec.leafnodes.remotes[0]", reason: metav1.StatusReasonInvalid},
	{name: "a leaf URL of another scheme is refused", edits: []edit{set("spec.leafnodes.remotes", []any{map[string]any{"name": "hub", "urls": []any{"http://h:7422"}}})},
		field: "spec.leafnodes.remotes[0].urls[0]", reason: metav1.StatusReasonInvalid},
	{name: "a leaf remote name that is no DNS label is refused", edits: []edit{set("spec.leafnodes.remotes", []any{map[string]any{"name": "Hub_1", "urls": []any{"nats://h:7422"}}})},
		field: "spec.leafnodes.remotes[0].name", reason: metav1.StatusReasonInvalid},
	{name: "an advertise address without a port is refused", edits: []edit{set("spec.gateway.advertise", "gw.example.com")}, field: "spec.gateway.advertise", reason: metav1.StatusReasonInvalid},
	{name: "accepting leaves without auth is refused", edits: []edit{remove("spec.auth")}, field: "spec.leafnodes.accept", reason: metav1.StatusReasonInvalid},
	{name: "gateway insecure beside gateway TLS is refused", edits: []edit{set("spec.gateway.tls", map[string]any{}), set("spec.gateway.insecure", true)}, field: "spec.gateway.insecure", reason: metav1.StatusReasonInvalid},
	{name: "a gateway with TLS (the default) and route TLS Disabled is refused", edits: []edit{set("spec.routes", map[string]any{"tls": map[string]any{"mode": "Disabled"}})}, field: "spec.gateway", reason: metav1.StatusReasonInvalid},
	{name: "leaf listener TLS without accept is refused", edits: []edit{set("spec.leafnodes", map[string]any{"tls": map[string]any{}})},
		field: "spec.leafnodes.tls", reason: metav1.StatusReasonInvalid},
	{name: "TLS on a leaf remote by urls without a CA Secret is refused", edits: []edit{set("spec.leafnodes.remotes", []any{map[string]any{
		"name": "hub", "urls": []any{"tls://h:7422"}, "tls": map[string]any{}}})}, field: "spec.leafnodes.remotes[0].tls", reason: metav1.StatusReasonInvalid},
	{name: "a gateway CA Secret name that is no DNS subdomain is refused", edits: []edit{set("spec.gateway.tls", map[string]any{"caSecret": map[string]any{"name": "Far_CAs"}})},
		field: "spec.gateway.tls.caSecret.name", reason: metav1.StatusReasonInvalid},
	{name: "nats resources in spec.resources and the podTemplate are refused", edits: []edit{
		set("spec.resources", map[string]any{"limits": map[string]any{"memory": "1Gi"}}),
		set("spec.podTemplate.spec.containers", []any{map[string]any{"name": "nats", "resources": map[string]any{"limits": map[string]any{"memory": "2Gi"}}}}),
	}, field: "spec.podTemplate.spec.containers", reason: metav1.StatusReasonInvalid},
}

func TestBadNatsClustersAreRefusedNamingTheField(t *testing.T) {
	for _, tc := range badClusters {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t, "bad")
			client := dynamic.NewForConfigOrDie(env.Config).Resource(natsClusters).Namespace(ns)
			var err error
			if tc.update {
				created, cerr := client.Create(ctx, newCluster("demo"), strictCreate)
				if cerr != nil {
					t.Fatalf("creating the valid NatsCluster: %v", cerr)
				}
				for _, e := range tc.edits {
					e(created.Object)
				}
				_, err = client.Update(ctx, created, strictUpdate)
			} else {
				_, err = client.Create(ctx, newCluster("demo", tc.edits...), strictCreate)
			}
			if err == nil {
				t.Fatalf("accepted, want refused naming %s", tc.field)
			}
			if got := apierrors.ReasonForError(err); got != tc.reason {
				t.Errorf("reason %q, want %q: %v", got, tc.reason, err)
			}
			if !namesField(err, tc.field) {
				t.Errorf("error does not name %s: %v", tc.field, err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestGoodVersionChangesAreAccepted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
	}{
		{"an update moving the minor version up by one is accepted", "2.15.2", "2.16.0"},
		{"an update moving the minor version down by one is accepted", "2.15.2", "2.14.9"},
		{"an update changing the patch version is accepted", "2.15.2", "2.15.3"},
		{"an update moving the patch version down is accepted", "2.15.2", "2.15.0"},
		{"an update to a prerelease of the next minor version is accepted", "2.15.2", "2.16.0-rc.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t, "good")
			client := dynamic.NewForConfigOrDie(env.Config).Resource(natsClusters).Namespace(ns)
			created, err := client.Create(ctx, newCluster("demo", set("spec.version", tc.from)), strictCreate)
			if err != nil {
				t.Fatalf("creating %s: %v", tc.from, err)
			}
			if err := unstructured.SetNestedField(created.Object, tc.to, "spec", "version"); err != nil {
				t.Fatal(err)
			}
			if _, err := client.Update(ctx, created, strictUpdate); err != nil {
				t.Fatalf("updating %s -> %s refused: %v", tc.from, tc.to, err)
			}
		})
	}
}

// Lame duck settings nats-server runs with are accepted: the floor of 30s,
// a grace period from 1s up to just under the duration, either one alone.
func TestGoodLameDuckSettingsAreAccepted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lameDuck map[string]any
	}{
		{"the tests' 30s with a grace period of 1s is accepted", map[string]any{"duration": "30s", "gracePeriod": "1s"}},
		{"the defaults written out are accepted", map[string]any{"duration": "30s", "gracePeriod": "10s"}},
		{"a grace period just under the default duration is accepted", map[string]any{"gracePeriod": "29s"}},
		{"a fractional grace period is accepted", map[string]any{"gracePeriod": "1.5s"}},
		{"a longer duration alone is accepted", map[string]any{"duration": "2m"}},
		{"a grace period longer than the default duration under a longer duration is accepted", map[string]any{"duration": "1m30s", "gracePeriod": "45s"}},
		{"an empty lameDuck is accepted", map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t, "lameduck")
			client := dynamic.NewForConfigOrDie(env.Config).Resource(natsClusters).Namespace(ns)
			if _, err := client.Create(ctx, newCluster("demo", set("spec.lameDuck", tc.lameDuck)), strictCreate); err != nil {
				t.Fatalf("spec.lameDuck %v refused: %v", tc.lameDuck, err)
			}
		})
	}
}

// TestDefaultsAreFilledIn checks the schema defaults a minimal NatsCluster.
func TestDefaultsAreFilledIn(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "defaults")
	client := dynamic.NewForConfigOrDie(env.Config).Resource(natsClusters).Namespace(ns)
	minimal := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.nats-operator.io/v1beta1",
		"kind":       "NatsCluster",
		"metadata":   map[string]any{"name": "demo"},
		"spec": map[string]any{
			"version":  "2.15.2",
			"replicas": int64(3),
			"auth": map[string]any{
				"trustRef":          map[string]any{"name": "demo"},
				"systemCredentials": map[string]any{"secretKeyRef": map[string]any{"name": "demo-system-creds"}},
			},
		},
	}}
	got, err := client.Create(ctx, minimal, strictCreate)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		path []string
		val  string
	}{
		{[]string{"spec", "image", "repository"}, "nats"},
		{[]string{"spec", "auth", "resolver"}, "Full"},
		{[]string{"spec", "auth", "systemCredentials", "secretKeyRef", "key"}, "user.creds"},
	} {
		v, _, _ := unstructured.NestedString(got.Object, want.path...)
		if v != want.val {
			t.Errorf("%s = %q, want %q", strings.Join(want.path, "."), v, want.val)
		}
	}
}

// namesField reports whether a refusal names field: as the field of one of
// its causes (schema and CEL errors), or in its message (strict field
// validation, which has no causes).
func namesField(err error, field string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	if s.Details != nil && len(s.Details.Causes) > 0 {
		for _, c := range s.Details.Causes {
			if c.Field == field {
				return true
			}
		}
		// A rule on the whole object (metadata.name) has no field path; its
		// message opens with the field.
		return strings.Contains(s.Message, "Invalid value: "+field+" must")
	}
	return strings.Contains(s.Message, `"`+field+`"`) || strings.Contains(s.Message, field+":")
}

// newNamespace makes a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// The README installs with kubectl apply -k manifests/: client-side apply
// keeps each object's whole manifest in the last-applied-configuration
// annotation, which the API server limits to 256 KiB. The NatsCluster CRD
// (pod template types included) must fit, and so must every other object
// kustomize renders; applied here for real (server-side dry run), with
// kubectl of the control plane's version.
func TestTheManifestsApplyWithKubectl(t *testing.T) {
	// The namespaces for real: a dry run creates nothing for the
	// namespaced objects after them.
	for _, ns := range []string{"nats-system", "nats"} {
		if out, err := env.Kubectl("create", "namespace", ns).CombinedOutput(); err != nil && !strings.Contains(string(out), "AlreadyExists") {
			t.Fatalf("kubectl create namespace %s: %v\n%s", ns, err, out)
		}
	}
	for _, dir := range []string{"../../manifests/", "../../manifests/namespaced/"} {
		out, err := env.Kubectl("apply", "--dry-run=server", "-k", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply --dry-run=server -k %s: %v\n%s", dir, err, out)
		}
		for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/natsclusters.cluster.nats-operator.io", "deployment.apps/nats-operator"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("kubectl apply -k %s applied no %s:\n%s", dir, want, out)
			}
		}
		if dir == "../../manifests/namespaced/" && (strings.Contains(string(out), "clusterrole.rbac.authorization.k8s.io/nats-operator ") ||
			!strings.Contains(string(out), "role.rbac.authorization.k8s.io/nats-operator ")) {
			t.Errorf("the namespaced install must have the Role nats-operator and not the ClusterRole:\n%s", out)
		}
	}
	crd, err := os.ReadFile("../../manifests/crds/cluster.nats-operator.io_natsclusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(crd)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the NatsCluster CRD is %d bytes of JSON, %d%% of the 262144 the last-applied annotation may hold", len(js), len(js)*100/262144)
}

// The namespaced install's Role grants in its namespace exactly what the
// ClusterRole grants everywhere, but StorageClasses (cluster-scoped: a
// ClusterRole of their own, get only).
func TestNamespacedRoleMatchesClusterRole(t *testing.T) {
	cluster := manifestRules(t, "../../manifests/rbac/cluster_role.yaml", "ClusterRole", "nats-operator")
	var want []any
	for _, r := range cluster {
		if fmt.Sprint(r.(map[string]any)["resources"]) != "[storageclasses]" {
			want = append(want, r)
		}
	}
	if len(want) != len(cluster)-1 {
		t.Fatalf("the ClusterRole has %d rules, %d of them not StorageClasses; want exactly one StorageClasses rule", len(cluster), len(want))
	}
	got := manifestRules(t, "../../manifests/namespaced/role.yaml", "Role", "nats-operator")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the namespaced Role's rules differ from the ClusterRole's:\n got  %v\n want %v", got, want)
	}
	reader := manifestRules(t, "../../manifests/namespaced/storageclass_reader.yaml", "ClusterRole", "nats-operator-storageclass-reader")
	if fmt.Sprint(reader) != "[map[apiGroups:[storage.k8s.io] resources:[storageclasses] verbs:[get]]]" {
		t.Errorf("the StorageClass reader grants %v, want get on storageclasses only", reader)
	}
}

// manifestRules returns the rules of the role of kind and name in a file.
func manifestRules(t *testing.T, path, kind, name string) []any {
	t.Helper()
	objs, err := testenv.ReadManifests(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			r, _, _ := unstructured.NestedSlice(o.Object, "rules")
			return r
		}
	}
	t.Fatalf("%s has no %s %s", path, kind, name)
	return nil
}
