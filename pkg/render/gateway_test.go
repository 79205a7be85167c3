package render_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	corev1 "k8s.io/api/core/v1"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// spec.gateway renders a gateway block nats-server loads (its name also
// cluster.name), each clusterRef as the referenced cluster's headless
// Service, the gateway port on the container, the headless Service and in
// the NetworkPolicy, and the Gateway facts; a remote naming the cluster
// itself is a SpecError.
func TestGatewayIsRenderedAndLoadsInNatsServer(t *testing.T) {
	remotes := []clusterv1beta1.GatewayRemote{
		rt.GatewayTo("west", "west"),
		{Name: "far", URLs: []string{"nats://far-1.example.com:7222", "tls://far-0.example.com:7522"}},
		{Name: "near", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "near"}},
	}
	nc := rt.NewCluster("east", "demo", rt.JetStream(), rt.Gateway(remotes...))
	nc.Spec.Gateway.Name, nc.Spec.Gateway.Advertise, nc.Spec.Gateway.RejectUnknownCluster = "east", "gw.example.com:32022", true
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		o := loadRendered(t, s.Config)
		if o.Gateway.Name != "east" || o.Cluster.Name != "east" || o.Gateway.Port != 7222 || o.Gateway.Advertise != "gw.example.com:32022" || !o.Gateway.RejectUnknown {
			t.Errorf("%s: nats-server reads gateway %q port %d advertise %q reject %t, cluster %q", s.Name, o.Gateway.Name, o.Gateway.Port, o.Gateway.Advertise, o.Gateway.RejectUnknown, o.Cluster.Name)
		}
		got := map[string][]string{}
		for _, g := range o.Gateway.Gateways {
			for _, u := range g.URLs {
				got[g.Name] = append(got[g.Name], u.String())
			}
		}
		want := map[string][]string{
			"west": {"nats://west-headless.west.svc:7222"},
			"far":  {"nats://far-1.example.com:7222", "tls://far-0.example.com:7522"},
			"near": {"nats://near-headless.east.svc:7222"},
		}
		for name, urls := range want {
			if !slices.Equal(got[name], urls) {
				t.Errorf("%s: remote %s has URLs %v, want %v", s.Name, name, got[name], urls)
			}
		}
		if !s.Facts.Gateway || s.Facts.GatewayRemotes != "far=nats://far-1.example.com:7222,tls://far-0.example.com:7522; near=nats://near-headless.east.svc:7222; west=nats://west-headless.west.svc:7222; advertise=gw.example.com:32022; reject_unknown_cluster" {
			t.Errorf("%s: facts Gateway %t GatewayRemotes %q", s.Name, s.Facts.Gateway, s.Facts.GatewayRemotes)
		}
		ports := s.StatefulSet.Spec.Template.Spec.Containers[0].Ports
		if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == "gateway" && p.ContainerPort == 7222 }) {
			t.Errorf("%s: container ports %v have no gateway 7222", s.Name, ports)
		}
	}
	if !slices.ContainsFunc(out.HeadlessService.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "gateway" && p.Port == 7222 }) {
		t.Errorf("headless Service ports %v have no gateway 7222", out.HeadlessService.Spec.Ports)
	}
	found := false
	for _, r := range out.NetworkPolicy.Spec.Ingress {
		if len(r.Ports) == 1 && r.Ports[0].Port.StrVal == "gateway" && len(r.From) == 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("the NetworkPolicy admits no gateway port from anywhere: %+v", out.NetworkPolicy.Spec.Ingress)
	}

	for _, self := range []clusterv1beta1.GatewayRemote{rt.GatewayTo("east", "demo"), {Name: "demo", URLs: []string{"nats://x:7222"}}} {
		_, err := render.Render(render.Input{Cluster: rt.NewCluster("east", "demo", rt.JetStream(), rt.Gateway(self))})
		var se *render.SpecError
		if !errors.As(err, &se) {
			t.Errorf("a remote %+v naming the cluster itself rendered: %v", self, err)
		} else {
			t.Logf("refused: %v", se)
		}
	}
}

// spec.leafnodes renders a leafnodes block nats-server loads: the listener
// with accept, each remote's URLs (a clusterRef as the hub's headless
// Service), its local account and its creds file, mounted from the Secret
// under /etc/nats-leaf; the leaf port on the container, the headless
// Service and in the NetworkPolicy, with accept only.
func TestLeafNodesAreRenderedAndLoadInNatsServer(t *testing.T) {
	nc := rt.NewCluster("edge", "leaf", rt.JetStream(), rt.LeafNodes(true,
		clusterv1beta1.LeafNodeRemote{Name: "hub", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "hub", Namespace: "core"},
			Credentials: &clusterv1beta1.SecretKeySelector{Name: "hub-creds", Key: "leaf.creds"}},
		clusterv1beta1.LeafNodeRemote{Name: "cloud", URLs: []string{"tls://connect.example.com:7422"}, Account: "APP"},
	))
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		o := loadRendered(t, s.Config)
		if o.LeafNode.Port != 7422 || len(o.LeafNode.Remotes) != 2 {
			t.Fatalf("%s: nats-server reads leafnodes port %d with %d remotes", s.Name, o.LeafNode.Port, len(o.LeafNode.Remotes))
		}
		hub, cloud := o.LeafNode.Remotes[0], o.LeafNode.Remotes[1]
		if len(hub.URLs) != 1 || hub.URLs[0].String() != "nats://hub-headless.core.svc:7422" || hub.Credentials != "/etc/nats-config/leaf-hub.creds" {
			t.Errorf("%s: remote hub %v credentials %q", s.Name, hub.URLs, hub.Credentials)
		}
		if len(cloud.URLs) != 1 || cloud.URLs[0].String() != "tls://connect.example.com:7422" || cloud.LocalAccount != "APP" || cloud.Credentials != "" {
			t.Errorf("%s: remote cloud %v account %q credentials %q", s.Name, cloud.URLs, cloud.LocalAccount, cloud.Credentials)
		}
		if !s.Facts.LeafnodesAccept || s.Facts.LeafnodeRemotes != "nats://hub-headless.core.svc:7422 credentials=/etc/nats-config/leaf-hub.creds; tls://connect.example.com:7422 account=APP" {
			t.Errorf("%s: facts accept %t remotes %q", s.Name, s.Facts.LeafnodesAccept, s.Facts.LeafnodeRemotes)
		}
		pod := s.StatefulSet.Spec.Template.Spec
		if !slices.ContainsFunc(pod.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "leafnodes" && p.ContainerPort == 7422 }) {
			t.Errorf("%s: no leafnodes port on the container", s.Name)
		}
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == render.ConfigVolumeName })
		if i < 0 || pod.Volumes[i].Projected == nil || !slices.ContainsFunc(pod.Volumes[i].Projected.Sources, func(p corev1.VolumeProjection) bool {
			return p.Secret != nil && p.Secret.Name == "leaf-leaf-credentials" && p.Secret.Optional != nil && *p.Secret.Optional && len(p.Secret.Items) == 0
		}) {
			t.Errorf("%s: the config volume does not project the Secret leaf-leaf-credentials (optional, every key)", s.Name)
		}
	}
	if !slices.ContainsFunc(out.HeadlessService.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "leafnodes" && p.Port == 7422 }) {
		t.Error("no leafnodes port on the headless Service")
	}
	// A leaf only (no accept): no listener, no port.
	leaf, err := render.Render(render.Input{Cluster: rt.NewCluster("edge", "leaf", rt.JetStream(), rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{Name: "hub", URLs: []string{"nats://h:7422"}}))})
	if err != nil {
		t.Fatal(err)
	}
	if o := loadRendered(t, leaf.Servers[0].Config); o.LeafNode.Port != 0 || len(o.LeafNode.Remotes) != 1 {
		t.Errorf("a leaf only listens on %d with %d remotes", o.LeafNode.Port, len(o.LeafNode.Remotes))
	}
}

// spec.gateway.tls renders a gateway tls block nats-server loads, with the
// routes' certificate and the CA bundle projected under gateway-tls and
// the bundle's digest in server_metadata (the GatewayTLS and GatewayCA
// facts); without route TLS it is a SpecError naming spec.gateway.tls.
func TestGatewayTLSIsRenderedAndNeedsRouteTLS(t *testing.T) {
	nc := rt.NewCluster("east", "demo", rt.JetStream(), rt.Gateway(rt.GatewayTo("west", "west")))
	nc.Spec.Gateway.TLS, nc.Spec.Gateway.Insecure = &clusterv1beta1.GatewayTLS{}, false
	routes := &render.TLSFiles{Secret: "demo-routes-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "r1", CADigest: "c1", Verify: true}
	gateway := &render.TLSFiles{Secret: "demo-routes-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", CASecret: "demo" + render.GatewayCASuffix,
		Digest: "r1", CADigest: "bundle1", Verify: true}

	_, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Gateway: gateway}})
	var se *render.SpecError
	if !errors.As(err, &se) || se.Field != "spec.gateway.tls" {
		t.Fatalf("gateway TLS without route TLS rendered or failed otherwise: %v", err)
	}
	t.Logf("refused: %v", se)

	out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Routes: routes, Gateway: gateway}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		o := loadRenderedWithTLSFiles(t, s.Config, render.RoutesTLSDir, render.GatewayTLSDir)
		if o.Gateway.TLSConfig == nil || o.Gateway.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert || o.Gateway.TLSConfig.RootCAs == nil {
			t.Errorf("%s: nats-server reads no verified gateway TLS: %+v", s.Name, o.Gateway.TLSConfig)
		}
		if !s.Facts.GatewayTLS || s.Facts.GatewayCA != "bundle1" {
			t.Errorf("%s: facts GatewayTLS %t GatewayCA %q", s.Name, s.Facts.GatewayTLS, s.Facts.GatewayCA)
		}
		var paths []string
		for _, v := range s.StatefulSet.Spec.Template.Spec.Volumes {
			if v.Name != render.ConfigVolumeName || v.Projected == nil {
				continue
			}
			for _, p := range v.Projected.Sources {
				if p.Secret == nil {
					continue
				}
				for _, it := range p.Secret.Items {
					paths = append(paths, p.Secret.Name+"/"+it.Key+"->"+it.Path)
				}
			}
		}
		for _, want := range []string{"demo-routes-tls/tls.crt->gateway-tls/tls.crt", "demo-routes-tls/tls.key->gateway-tls/tls.key", "demo-gateway-ca/ca.crt->gateway-tls/ca.crt"} {
			if !slices.Contains(paths, want) {
				t.Errorf("%s: the config volume projects %v, not %s", s.Name, paths, want)
			}
		}
	}
}

// loadRenderedWithTLSFiles loads a rendered config as loadRendered does,
// with a CA and a certificate of it written under each of dirs of the
// config directory (or, for a name ending in .ca.crt, the CA as that
// file), which moves under a temporary directory.
func loadRenderedWithTLSFiles(t *testing.T, cfg []byte, dirs ...string) *server.Options {
	t.Helper()
	root := t.TempDir()
	now := time.Now()
	ca, err := pki.NewCA("test CA", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.Issue(ca, "test", []string{"*.demo-headless.east.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if strings.HasSuffix(d, ".ca.crt") {
			// A CA file of its own (a leaf remote's).
			if err := os.WriteFile(filepath.Join(root, render.ConfigDir, d), ca.Cert, 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for name, b := range map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": ca.Cert} {
			p := filepath.Join(root, render.ConfigDir, d, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return loadRendered(t, bytes.ReplaceAll(cfg, []byte(`"`+render.ConfigDir+`/`), []byte(`"`+root+render.ConfigDir+`/`)))
}

// spec.leafnodes.tls renders the listener's TLS with the routes'
// certificate, leaves not verified; a remote's tls its CA file in the
// config directory and "tls" in the LeafnodeRemotes fact with the CAs'
// digest; both need what they need (route TLS; a CA for a remote by urls).
func TestLeafNodeTLSIsRenderedAndLoadsInNatsServer(t *testing.T) {
	nc := rt.NewCluster("east", "demo", rt.JetStream(), rt.LeafNodes(true, clusterv1beta1.LeafNodeRemote{
		Name: "hub", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "hub", Namespace: "core"}, TLS: &clusterv1beta1.LeafRemoteTLS{},
	}))
	nc.Spec.LeafNodes.TLS = &clusterv1beta1.LeafNodesTLS{}
	routes := &render.TLSFiles{Secret: "demo-routes-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "r1", CADigest: "c1", Verify: true}
	_, err := render.Render(render.Input{Cluster: nc})
	var se *render.SpecError
	if !errors.As(err, &se) || se.Field != "spec.leafnodes.tls" {
		t.Fatalf("leaf listener TLS without route TLS rendered or failed otherwise: %v", err)
	}
	out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Routes: routes, LeafCAs: "cas1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		o := loadRenderedWithTLSFiles(t, s.Config, render.RoutesTLSDir, render.LeafCAKey("hub"))
		if o.LeafNode.TLSConfig == nil || o.LeafNode.TLSConfig.ClientAuth != tls.NoClientCert {
			t.Errorf("%s: nats-server reads leaf listener TLS %+v, want TLS not asking leaves for a certificate", s.Name, o.LeafNode.TLSConfig)
		}
		if len(o.LeafNode.Remotes) != 1 || o.LeafNode.Remotes[0].TLSConfig == nil || o.LeafNode.Remotes[0].TLSConfig.RootCAs == nil {
			t.Errorf("%s: nats-server reads no remote TLS with a CA: %+v", s.Name, o.LeafNode.Remotes)
		}
		if !s.Facts.LeafnodesTLS || s.Facts.LeafnodeRemotes != "nats://hub-headless.core.svc:7422 tls; cas=cas1" {
			t.Errorf("%s: facts LeafnodesTLS %t LeafnodeRemotes %q", s.Name, s.Facts.LeafnodesTLS, s.Facts.LeafnodeRemotes)
		}
	}
	byURLs := rt.NewCluster("east", "demo", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{Name: "hub", URLs: []string{"tls://hub.example.com:7422"}, TLS: &clusterv1beta1.LeafRemoteTLS{}}))
	if _, err := render.Render(render.Input{Cluster: byURLs}); !errors.As(err, &se) || se.Field != "spec.leafnodes.remotes[0].tls" {
		t.Errorf("a remote by urls with tls and no caSecret rendered or failed otherwise: %v", err)
	}
}

// Gateway TLS is how clusters of a supercluster authenticate each other:
// every server presents its certificate and verifies the other's against
// its CA bundle, both ways. Two single servers rendered from east and west
// with spec.gateway.tls, each with a certificate of its own CA, run in
// process: with each CA in the other's bundle they connect both ways; with
// west's CA missing from east's bundle neither connection is made (east
// refuses west's certificate when it dials and when west dials it).
func TestGatewayTLSRefusesAClusterWhoseCAIsNotInTheBundle(t *testing.T) {
	now := time.Now()
	caEast, err := pki.NewCA("east routes CA", now)
	if err != nil {
		t.Fatal(err)
	}
	caWest, err := pki.NewCA("west routes CA", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		eastTrust [][]byte
		connected bool
	}{
		{"west's CA in east's bundle", [][]byte{caEast.Cert, caWest.Cert}, true},
		{"west's CA not in east's bundle", [][]byte{caEast.Cert}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			west := startGatewayServer(t, "west", caWest, bytes.Join([][]byte{caWest.Cert, caEast.Cert}, nil), "")
			east := startGatewayServer(t, "east", caEast, bytes.Join(c.eastTrust, nil), west.GatewayAddr().String())
			counts := func() (eo, ei, wo, wi int) {
				eo, ei = gatewayConnections(t, east)
				wo, wi = gatewayConnections(t, west)
				return
			}
			connected := func() bool {
				eo, ei, wo, wi := counts()
				return eo == 1 && ei == 1 && wo == 1 && wi == 1
			}
			if c.connected {
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) && !connected() {
					time.Sleep(50 * time.Millisecond)
				}
			} else {
				// Time for both to dial and be refused, and retry.
				time.Sleep(2 * time.Second)
			}
			eo, ei, wo, wi := counts()
			got := fmt.Sprintf("east out %d in %d, west out %d in %d", eo, ei, wo, wi)
			t.Log(got)
			if c.connected && !connected() {
				t.Fatalf("the gateways did not connect both ways: %s", got)
			}
			if !c.connected && eo+ei+wo+wi != 0 {
				t.Fatalf("a gateway connected although east does not trust west's CA: %s", got)
			}
		})
	}
}

// startGatewayServer renders a one-server cluster named name with
// spec.gateway.tls (a remote by url when remote is set), writes a
// certificate of ca for 127.0.0.1 as the routes' and the gateway's, and
// bundle as the gateway CA bundle, and runs it in process on loopback
// ports with its route block dropped.
func startGatewayServer(t *testing.T, name string, ca pki.Pair, bundle []byte, remote string) *server.Server {
	t.Helper()
	var remotes []clusterv1beta1.GatewayRemote
	if remote != "" {
		remotes = append(remotes, clusterv1beta1.GatewayRemote{Name: "west", URLs: []string{"tls://" + remote}})
	}
	nc := rt.NewCluster(name, name, rt.Replicas(1), rt.Gateway(remotes...))
	nc.Spec.Gateway.TLS, nc.Spec.Gateway.Insecure = &clusterv1beta1.GatewayTLS{}, false
	files := &render.TLSFiles{Secret: name + "-routes-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "r", CADigest: "c", Verify: true}
	gateway := *files
	gateway.CASecret = name + render.GatewayCASuffix
	out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Routes: files, Gateway: &gateway}})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueForIPs(ca, name, []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for dir, trust := range map[string][]byte{render.RoutesTLSDir: ca.Cert, render.GatewayTLSDir: bundle} {
		for file, b := range map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": trust} {
			p := filepath.Join(root, render.ConfigDir, dir, file)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := bytes.ReplaceAll(out.Servers[0].Config, []byte(`"`+render.ConfigDir+`/`), []byte(`"`+root+render.ConfigDir+`/`))
	o := loadRendered(t, cfg)
	o.Host, o.Port, o.HTTPPort, o.NoSigs, o.NoLog = "127.0.0.1", -1, 0, true, true
	o.Cluster.Host, o.Cluster.Port, o.Routes = "127.0.0.1", -1, nil
	o.Gateway.Host, o.Gateway.Port = "127.0.0.1", -1
	o.Gateway.ConnectRetries = 0
	o.PidFile, o.PortsFileDir = "", ""
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatalf("%s did not start", name)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// gatewayConnections counts a server's outbound and inbound gateway
// connections (its /gatewayz).
func gatewayConnections(t *testing.T, s *server.Server) (out, in int) {
	t.Helper()
	z, err := s.Gatewayz(&server.GatewayzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range z.OutboundGateways {
		if g.Connection != nil {
			out++
		}
	}
	for _, gs := range z.InboundGateways {
		in += len(gs)
	}
	return out, in
}
