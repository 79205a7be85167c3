package framework

import (
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Test clusters run nats-server's lame duck mode with a grace period of 1s
// (the duration stays 30s, the least nats-server accepts), so that each
// server a test restarts, scales away or deletes exits within seconds of
// the preStop signal instead of production's 10s wait: measured, a server
// with 3 clients exits 11.1s after the lame duck signal at 30s/10s and
// 2.9s after it at 30s/1s. Every NatsCluster the Stack applies gets it
// unless it sets spec.lameDuck itself; a test about lame duck mode or
// rolling under load keeps production timings with ProductionLameDuck.
const TestLameDuckGracePeriod = "1s"

// TestLameDuck is spec.lameDuck of a test cluster, for a NatsCluster a test
// creates through the typed client.
func TestLameDuck() *clusterv1beta1.LameDuckSpec {
	d, err := time.ParseDuration(TestLameDuckGracePeriod)
	if err != nil {
		panic(err)
	}
	return &clusterv1beta1.LameDuckSpec{GracePeriod: &metav1.Duration{Duration: d}}
}

// ProductionLameDuck gives a NatsCluster object the lame duck settings of a
// cluster that sets none (30s and 10s), written out so that the Stack
// leaves them alone: for the tests about lame duck mode or rolling under
// load, which must see what production clusters do.
func ProductionLameDuck(o *unstructured.Unstructured) {
	if o.GetKind() != "NatsCluster" {
		return
	}
	if err := unstructured.SetNestedMap(o.Object, map[string]any{
		"duration":    clusterv1beta1.DefaultLameDuckDuration.String(),
		"gracePeriod": clusterv1beta1.DefaultLameDuckGracePeriod.String(),
	}, "spec", "lameDuck"); err != nil {
		panic(err)
	}
}

// withTestLameDuck gives a NatsCluster object that sets no spec.lameDuck
// the test clusters' grace period. Every apply of the Stack does this, so a
// later apply of the same object without spec.lameDuck keeps it (a
// server-side apply that left the field out would remove it, a change
// that restarts every server).
func withTestLameDuck(o *unstructured.Unstructured) {
	if o.GetKind() != "NatsCluster" {
		return
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "lameDuck"); found {
		return
	}
	if err := unstructured.SetNestedField(o.Object, TestLameDuckGracePeriod, "spec", "lameDuck", "gracePeriod"); err != nil {
		panic(err)
	}
}

// The parts of a manifest WithTestLameDuckYAML looks for.
var (
	documentSeparator = regexp.MustCompile(`(?m)^---\n`)
	natsClusterKind   = regexp.MustCompile(`(?m)^kind: NatsCluster$`)
	topLevelSpec      = regexp.MustCompile(`(?m)^spec:\n`)
	lameDuckSet       = regexp.MustCompile(`(?m)^  lameDuck:`)
)

// WithTestLameDuckYAML gives each NatsCluster of a manifest (YAML text, one
// or more documents) that sets no spec.lameDuck the test clusters' grace
// period, as the Stack does when it applies one: for a manifest a test
// hands to another tool (kubectl nats plan) about a cluster the Stack
// applied.
func WithTestLameDuckYAML(manifest string) string {
	docs := documentSeparator.Split(manifest, -1)
	for i, d := range docs {
		if !natsClusterKind.MatchString(d) || lameDuckSet.MatchString(d) {
			continue
		}
		if loc := topLevelSpec.FindStringIndex(d); loc != nil {
			docs[i] = d[:loc[1]] + "  lameDuck:\n    gracePeriod: " + TestLameDuckGracePeriod + "\n" + d[loc[1]:]
		}
	}
	return strings.Join(docs, "---\n")
}
