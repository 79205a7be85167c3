//go:build ignore

// Command coredns is CoreDNS (github.com/coredns/coredns) with only the
// plugins a cluster's DNS needs, the real node's (hack/realnode.sh) in
// place of upstream's image: a smaller, quicker build than upstream's main,
// which links every plugin (clouds, etcd, dnstap, geoip, ...).
//
// It is CoreDNS's own main, coremain.Run, with the plugins it links chosen
// as CoreDNS documents for custom builds: their packages imported, and
// dnsserver.Directives (the plugins a Corefile may name, in the order they
// handle a query) set to them before the server starts, in the order of
// upstream's plugin.cfg:
//
//	ready, health  the readiness and liveness endpoints (:8181/ready, :8080/health)
//	errors, log    errors and queries logged
//	cache          answers cached
//	kubernetes     the cluster.local zone from Services and EndpointSlices
//	forward        every other name sent to the node's resolvers
//
// Without loop, reload, prometheus, loadbalance: a Corefile naming one of
// them is refused at startup. `coredns -plugins` also lists plugins these
// import (debug, dnstap, metadata, prometheus, transfer): linked, but not
// directives, so no Corefile can name them either.
//
// The build constraint keeps it out of the main module, which does not
// require CoreDNS: hack/testbin.sh (node) copies it into a scratch module
// that does and builds it as a file (go build main.go), which ignores the
// constraint.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins, in upstream's plugin.cfg order.
var directives = []string{
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
	"forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		panic(err) // a fixed list: cannot fail
	}
	coremain.Run()
}
