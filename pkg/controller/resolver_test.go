package controller

import (
	"testing"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// TestMemoryResolverIsOneName: the planner recognises the memory resolver by
// the resolver.type render writes for it; the two constants are one value.
func TestMemoryResolverIsOneName(t *testing.T) {
	if render.MemoryResolver != rollout.MemoryResolver {
		t.Fatalf("render writes resolver.type %q for spec.auth.resolver Memory, the planner looks for %q", render.MemoryResolver, rollout.MemoryResolver)
	}
}
