package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestTheCommittedAuthExampleHoldsAWorkingChain reads the trust objects of
// manifests/examples/natscluster-auth.yaml, made by this command, and checks
// that they form a valid chain that a server accepts, and that the
// NatsCluster there refers to them.
func TestTheCommittedAuthExampleHoldsAWorkingChain(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", "natscluster-auth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]any{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		md, _ := m["metadata"].(map[string]any)
		objs[m["kind"].(string)+"/"+md["name"].(string)] = m
	}
	field := func(key string, path ...string) string {
		t.Helper()
		v := any(objs[key])
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%s has no %s", key, strings.Join(path, "."))
			}
			v = m[p]
		}
		s, ok := v.(string)
		if !ok {
			t.Fatalf("%s %s is %v, want a string", key, strings.Join(path, "."), v)
		}
		return s
	}

	auth := []string{"spec", "auth"}
	refs := []string{
		"NatsOperatorTrust/" + field("NatsCluster/demo", append(auth, "trustRef", "name")...),
		"Secret/" + field("NatsCluster/demo", append(auth, "systemCredentials", "secretKeyRef", "name")...),
	}
	accountRefs, _, _ := unstructured.NestedSlice(objs["NatsCluster/demo"], append(auth, "accountTrustRefs")...)
	if len(accountRefs) != 1 {
		t.Fatalf("got %d accountTrustRefs, want 1", len(accountRefs))
	}
	name, _ := accountRefs[0].(map[string]any)["name"].(string)
	refs = append(refs, "NatsAccountTrust/"+name)
	for _, ref := range refs {
		if _, ok := objs[ref]; !ok {
			t.Errorf("the NatsCluster refers to %s, which the example lacks", ref)
		}
	}
	if t.Failed() {
		return
	}

	c := &Chain{
		OperatorJWT:         field("NatsOperatorTrust/demo", "spec", "operatorJWT"),
		SystemAccountJWT:    field("NatsOperatorTrust/demo", "spec", "systemAccountJWT"),
		AppAccountPublicKey: field("NatsAccountTrust/demo-app", "spec", "publicKey"),
		AppAccountJWT:       field("NatsAccountTrust/demo-app", "spec", "jwt"),
		SystemUserCreds:     []byte(field("Secret/demo-system-creds", "stringData", CredsKey)),
		AppUserCreds:        []byte(field("Secret/demo-app-creds", "stringData", CredsKey)),
	}
	sys, err := jwtSubject(c.SystemAccountJWT)
	if err != nil {
		t.Fatal(err)
	}
	c.SystemAccountPublicKey = sys
	checkChain(t, c)
	checkServerAdmitsBothUsers(t, c)
}
