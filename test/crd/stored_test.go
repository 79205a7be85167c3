package crd

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// A NatsCluster stored before a rule of the CRD existed (an older CRD, or
// one applied with validation off) reaches the controller as it is: every
// spec the CRD refuses today is refused by render too, as a SpecError
// naming the field (the controller holds it InvalidSpec; no server is
// touched), never rendered into servers nats-server or the API server would
// refuse. Cases of spec.auth (its references and resolver: render refuses
// them as trust errors) and transition rules (an update, which needs the
// old object) are left out; a spec the typed client cannot decode at all is
// logged (the informer cannot cache it either).
func TestEverySpecTheCRDRefusesIsInvalidSpecWhenStored(t *testing.T) {
	checked := 0
	for _, tc := range badClusters {
		if tc.update || tc.reason != metav1.StatusReasonInvalid || strings.HasPrefix(tc.field, "spec.auth") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			u := newCluster("demo", tc.edits...)
			unstructured.RemoveNestedField(u.Object, "spec", "auth")
			if !strings.HasPrefix(tc.field, "spec.gateway") {
				// Render is given no TLS files: the gateway runs without.
				_ = unstructured.SetNestedField(u.Object, true, "spec", "gateway", "insecure")
			}
			if tc.field != "spec.leafnodes.accept" {
				// Without spec.auth the leaf listener runs open only by
				// saying so; every other case is about its own field.
				_ = unstructured.SetNestedField(u.Object, true, "spec", "leafnodes", "insecure")
			}
			var nc clusterv1beta1.NatsCluster
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
				t.Logf("the typed client cannot decode it: %v", err)
				return
			}
			nc.Namespace = "ns"
			checked++
			out, err := render.Render(render.Input{Cluster: &nc})
			var se *render.SpecError
			switch {
			case err == nil:
				t.Fatalf("rendered %d servers; want a SpecError naming %s", len(out.Servers), tc.field)
			case !errors.As(err, &se):
				t.Fatalf("refused with %T %v, want a SpecError naming %s", err, err, tc.field)
			case !strings.HasPrefix(se.Field, tc.field) && !strings.HasPrefix(tc.field, se.Field):
				t.Errorf("SpecError names %s, want %s: %s", se.Field, tc.field, se.Message)
			}
			t.Logf("held InvalidSpec: %s: %s", se.Field, se.Message)
		})
	}
	if checked < 20 {
		t.Errorf("only %d specs checked; the test would prove little", checked)
	}
}
