package localnode

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/test/localnode/internal/podns"
)

// ClusterDomain is the cluster's DNS domain, the kubelet's default.
const ClusterDomain = "cluster.local"

// ndots is the kubelet's ndots option for dnsPolicy ClusterFirst: a name
// with fewer dots is looked up through the search path first.
const ndots = 5

// dnsView is the cluster DNS of a moment, as CoreDNS answers it from
// Services and their endpoints: fully qualified names (no trailing dot)
// to addresses.
type dnsView map[string][]string

func (v dnsView) add(name, ip string) {
	for _, a := range v[name] {
		if a == ip {
			return
		}
	}
	v[name] = append(v[name], ip)
}

// dnsView builds the records of every Service with a selector in the
// cluster (the informer's view, all nodes' pods):
//
//   - a headless Service (clusterIP None): <svc>.<ns>.svc.cluster.local to
//     the address of every endpoint, and <hostname>.<svc>.<ns>.svc.cluster.local
//     to the endpoint of a pod with that spec.hostname and spec.subdomain
//     <svc> (a StatefulSet's pods with serviceName <svc>);
//   - any other Service: <svc>.<ns>.svc.cluster.local to the address of one
//     endpoint, the first by pod name, standing for the Service's virtual IP.
//
// An endpoint is a pod of the selector with an address that is not
// Succeeded or Failed, and is Ready and not terminating, unless the Service
// publishes not-ready addresses. A pod this node runs has its address from
// the moment its worker starts, before the API shows it.
func (n *Node) dnsView() dnsView {
	v := dnsView{}
	services, err := n.services.List(labels.Everything())
	if err != nil {
		return v
	}
	pods, err := n.pods.List(labels.Everything())
	if err != nil {
		return v
	}
	local := n.localAddresses()
	byNS := map[string][]*corev1.Pod{}
	for _, p := range pods {
		byNS[p.Namespace] = append(byNS[p.Namespace], p)
	}
	for _, ps := range byNS {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	}
	sort.Slice(services, func(i, j int) bool {
		if services[i].Namespace != services[j].Namespace {
			return services[i].Namespace < services[j].Namespace
		}
		return services[i].Name < services[j].Name
	})
	for _, s := range services {
		if len(s.Spec.Selector) == 0 || s.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		headless := s.Spec.ClusterIP == corev1.ClusterIPNone
		name := s.Name + "." + s.Namespace + ".svc." + ClusterDomain
		for _, p := range byNS[s.Namespace] {
			if !sel.Matches(labels.Set(p.Labels)) || !isEndpoint(p, s) {
				continue
			}
			ip := local[p.UID]
			if ip == "" {
				ip = p.Status.PodIP
			}
			if ip == "" {
				continue
			}
			if !headless {
				if len(v[name]) == 0 {
					v.add(name, ip)
				}
				continue
			}
			v.add(name, ip)
			if p.Spec.Hostname != "" && p.Spec.Subdomain == s.Name {
				v.add(strings.ToLower(p.Spec.Hostname)+"."+name, ip)
			}
		}
	}
	return v
}

// isEndpoint reports whether pod p is an endpoint of Service s that DNS
// answers with, as the EndpointSlice controller and CoreDNS decide.
func isEndpoint(p *corev1.Pod, s *corev1.Service) bool {
	if isTerminal(p) {
		return false
	}
	if s.Spec.PublishNotReadyAddresses {
		return true
	}
	return p.DeletionTimestamp == nil && kubeutil.PodReady(p)
}

// localAddresses maps the pods this node runs to their addresses.
func (n *Node) localAddresses() map[types.UID]string {
	n.mu.Lock()
	ws := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		ws = append(ws, w)
	}
	n.mu.Unlock()
	m := map[types.UID]string{}
	for _, w := range ws {
		w.mu.Lock()
		if w.ip != "" {
			m[w.uid] = w.ip
		}
		w.mu.Unlock()
	}
	return m
}

// searchPath is the kubelet's DNS search path for a pod in namespace ns
// with dnsPolicy ClusterFirst; outside pods (ns "") it lacks the first
// entry.
func searchPath(ns string) []string {
	var s []string
	if ns != "" {
		s = append(s, ns+".svc."+ClusterDomain)
	}
	return append(s, "svc."+ClusterDomain, ClusterDomain)
}

// lookup resolves name as the resolver of a pod in namespace ns would
// (search path and ndots), or outside pods with ns "". A trailing dot makes
// the name absolute.
func (v dnsView) lookup(name, ns string) []string {
	name = strings.ToLower(name)
	if strings.HasSuffix(name, ".") {
		return v[strings.TrimSuffix(name, ".")]
	}
	if name == "" {
		return nil
	}
	if strings.Count(name, ".") >= ndots {
		if a := v[name]; len(a) > 0 {
			return a
		}
	}
	for _, d := range searchPath(ns) {
		if a := v[name+"."+d]; len(a) > 0 {
			return a
		}
	}
	return v[name]
}

// hostsHeader is the start of every pod's /etc/hosts, as the kubelet
// writes it; hostsFiles.file puts the pod's own address for localhost.
const hostsHeader = `# Kubernetes-managed hosts file (localnode).
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
fe00::0	ip6-localnet
fe00::0	ip6-mcastprefix
fe00::1	ip6-allnodes
fe00::2	ip6-allrouters
`

// podLocalhost is hostsHeader for a pod with address ip: localhost is the
// pod's own address, and ::1 is no longer localhost.
//
// In a real pod, localhost is the loopback of the pod's own network
// namespace, where only the pod's containers listen: a sidecar reaches its
// nats-server at http://localhost:8222. Here pods share the machine's
// network, each listening on its own address (wildcard listeners are
// rewritten to it), and 127.0.0.1 and ::1 are the machine's, shared by every
// pod and process. So the pod's own address is what stands for its
// loopback, and giving it the name localhost keeps that meaning for every
// program of the pod, whatever reads the name (arguments, config files,
// URLs built at run time, a listener on localhost:8222), with no argument
// rewritten. ::1 loses the name, else a dial of localhost that the pod
// refuses (its server not up yet) would fall back to [::1], where a
// process of the machine may listen (Go listens on [::] for 0.0.0.0).
// Literal 127.0.0.1 and ::1 still reach the machine's loopback, and
// programs that resolve localhost by themselves (curl does, per RFC 6761)
// do not read this line.
func podLocalhost(ip string) string {
	if ip == "" {
		return hostsHeader
	}
	h := strings.Replace(hostsHeader, "127.0.0.1\tlocalhost\n", ip+"\tlocalhost\n", 1)
	return strings.Replace(h, "::1\tlocalhost ip6-localhost", "::1\tip6-localhost", 1)
}

// hostsFiles writes the hosts files of one dnsView. The cluster DNS lines
// depend on the pod's namespace alone (its search path), less the pod's own
// names, so they are resolved and rendered once per namespace and view,
// not once per pod: with 100 pods in 10 namespaces, rewriting every pod's
// file resolved every name of the view for each pod, and took a quarter of
// a core of the machine the API server shares while 100 pods restarted
// (hack/bench-scale.sh).
type hostsFiles struct {
	v     dnsView
	lines map[string]*nsLines // by namespace
}

// nsLines are the cluster DNS lines of the pods of one namespace, before a
// pod's own names are taken out: by address, each rendered, and where each
// name is.
type nsLines struct {
	lines    []hostsLine
	rendered []string
	byName   map[string][]int
}

// hostsLine is one cluster DNS line: an address and the names that
// resolve to it, longest first, then in order.
type hostsLine struct {
	ip    string
	names []string
}

func (l hostsLine) render(skip map[string]bool) string {
	kept := make([]string, 0, len(l.names))
	for _, name := range l.names {
		if !skip[name] {
			kept = append(kept, name)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return l.ip + "\t" + strings.Join(kept, " ") + "\n"
}

func newHostsFiles(v dnsView) *hostsFiles {
	return &hostsFiles{v: v, lines: map[string]*nsLines{}}
}

// clusterLines are the cluster DNS lines of a pod in namespace ns, sorted
// by address.
func (h *hostsFiles) clusterLines(ns string) *nsLines {
	if l, ok := h.lines[ns]; ok {
		return l
	}
	v := h.v
	names := map[string]bool{}
	search := searchPath(ns)
	for fqdn := range v {
		names[fqdn] = true
		for _, d := range search {
			if short, ok := strings.CutSuffix(fqdn, "."+d); ok {
				names[short] = true
			}
		}
	}
	byIP := map[string][]string{}
	for name := range names {
		for _, a := range v.lookup(name, ns) {
			byIP[a] = append(byIP[a], name)
		}
	}
	lines := make([]hostsLine, 0, len(byIP))
	for a, l := range byIP {
		sort.Slice(l, func(i, j int) bool {
			if len(l[i]) != len(l[j]) {
				return len(l[i]) > len(l[j])
			}
			return l[i] < l[j]
		})
		lines = append(lines, hostsLine{ip: a, names: l})
	}
	sort.Slice(lines, func(i, j int) bool {
		x, errX := netip.ParseAddr(lines[i].ip)
		y, errY := netip.ParseAddr(lines[j].ip)
		if errX != nil || errY != nil {
			return lines[i].ip < lines[j].ip
		}
		return x.Less(y)
	})
	nl := &nsLines{lines: lines, rendered: make([]string, len(lines)), byName: map[string][]int{}}
	for i, l := range lines {
		nl.rendered[i] = l.render(nil)
		for _, name := range l.names {
			nl.byName[name] = append(nl.byName[name], i)
		}
	}
	h.lines[ns] = nl
	return nl
}

// file is the /etc/hosts of a pod in namespace ns with address ip:
// the kubelet's lines (localhost, here the pod's own address, and the pod's
// own hostname and, with a subdomain, its fully qualified name), then every
// name of the cluster DNS that the pod's resolver would find, by the pod's
// search path: for a record a.b.ns.svc.cluster.local also a.b.ns.svc,
// a.b.ns and, from a pod of namespace ns, a.b. A name resolves to what the
// pod's resolver would get first through its search path; the pod's own
// names are only its own.
//
// spec.hostAliases follow the kubelet's lines, as the kubelet writes
// them, with 127.0.0.1 as the pod's own address (the pod's loopback,
// as localhost above). A name an alias gives is left out of the cluster
// DNS lines: the resolver reads the file before asking DNS, so on a real
// node the alias alone answers it.
//
// The cluster DNS lines are the view's lines of the pod's namespace; the
// lines that hold one of the pod's own names are rendered again without
// them.
func (h *hostsFiles) file(ns, ip, hostname, subdomain string, aliases ...corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(podLocalhost(ip))
	own := map[string]bool{"localhost": true}
	if ip != "" {
		if subdomain != "" {
			fqdn := hostname + "." + subdomain + "." + ns + ".svc." + ClusterDomain
			fmt.Fprintf(&b, "%s\t%s\t%s\n", ip, fqdn, hostname)
			own[fqdn] = true
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
		own[hostname] = true
	}
	if len(aliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range aliases {
			addr := a.IP
			if addr == "127.0.0.1" && ip != "" {
				addr = ip
			}
			if len(a.Hostnames) == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s\t%s\n", addr, strings.Join(a.Hostnames, "\t"))
			for _, h := range a.Hostnames {
				own[h] = true
			}
		}
	}
	nl := h.clusterLines(ns)
	touched := map[int]bool{}
	for name := range own {
		for _, i := range nl.byName[name] {
			touched[i] = true
		}
	}
	header := false
	for i, line := range nl.lines {
		text := nl.rendered[i]
		if touched[i] {
			text = line.render(own)
		}
		if text == "" {
			continue
		}
		if !header {
			b.WriteString("# Cluster DNS (localnode): pods of headless Services and Services.\n")
			header = true
		}
		b.WriteString(text)
	}
	return b.Bytes()
}

// Resolve returns the address a cluster DNS name has for the pods: a pod's
// stable name through its headless Service
// (demo-0-0.demo-headless.nats.svc.cluster.local, also without
// .cluster.local or without .svc.cluster.local) or a Service's name
// (demo.nats.svc.cluster.local). Names are resolved as from outside any
// namespace: the search path is svc.cluster.local and cluster.local. A
// headless Service's name has the address of every endpoint, and Resolve
// returns the first (by pod name); any other Service's name has one
// endpoint's address, standing for the virtual IP a real cluster gives it.
// ok is false if the name has no address now (no such pod or Service, or no
// endpoint yet). It reads the same records as the pods' /etc/hosts files,
// without the Go resolver's 5 s cache of /etc/hosts.
//
// Processes that are not pods (the controller under test, test clients)
// do not read those files; a test that checks a server's certificate for
// its DNS name dials the address with the name as TLS server name, or uses
// Dial or DialContext.
func (n *Node) Resolve(name string) (ip string, ok bool) {
	a := n.dnsView().lookup(name, "")
	if len(a) == 0 {
		return "", false
	}
	return a[0], true
}

// DialContext dials address (host:port) as a pod would: a host that is a
// cluster DNS name is resolved with Resolve, and an IP address is dialled
// as it is; any other host fails as not found, so no lookup leaves the
// machine. The connection's peer is the address; a TLS client on top sets
// ServerName to the name, so the server's certificate is checked for it:
//
//	conn, err := node.DialContext(ctx, "tcp", "demo-0-0.demo-headless.nats.svc.cluster.local:4222")
//	tls.Client(conn, &tls.Config{ServerName: "demo-0-0.demo-headless.nats.svc.cluster.local", RootCAs: pool})
//
// With nats.go, nats.SetCustomDialer(node) and nats.SkipHostLookup() (else
// nats.go first asks the machine's resolver) dial the URL's host this way,
// and nats.Secure checks the server's certificate for that host.
func (n *Node) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err != nil {
		ip, ok := n.Resolve(host)
		if !ok {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
		}
		address = net.JoinHostPort(ip, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// Dial is DialContext without a context, for nats.SetCustomDialer; it
// gives up after 10 s.
func (n *Node) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.DialContext(ctx, network, address)
}

// podNSMode is how this process gives pods their mount namespaces,
// detected once.
var podNSMode = sync.OnceValues(func() (podns.Mode, error) {
	return podns.Detect(os.TempDir(), "/etc/hosts")
})

// resolvConf is the /etc/resolv.conf of every pod of the node: a
// nameserver where nothing listens (a loopback address of the node's block
// that is never a pod's), so a name missing from /etc/hosts fails at once
// and no query leaves the machine.
func (n *Node) writeResolvConf() error {
	n.resolvConf = ""
	if _, err := os.Stat("/etc/resolv.conf"); err != nil {
		// Nothing to mount over; resolvers then ask 127.0.0.1:53.
		return nil
	}
	path := filepath.Join(n.opts.Root, "resolv.conf")
	body := fmt.Sprintf("# Written by localnode: there is no cluster DNS server; the cluster's\n"+
		"# names are in /etc/hosts. Nothing listens at this address.\n"+
		"nameserver 127.%d.255.255\noptions attempts:1 timeout:1\n", n.addrs.block)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return err
	}
	n.resolvConf = path
	return nil
}

// podMounts are the files bind-mounted in the mount namespace of each
// process of pod w.
func (w *podWorker) podMounts() []podns.Mount {
	m := []podns.Mount{{Source: w.hostsPath(), Target: "/etc/hosts"}}
	if w.n.resolvConf != "" {
		m = append(m, podns.Mount{Source: w.n.resolvConf, Target: "/etc/resolv.conf"})
	}
	return m
}

func (w *podWorker) hostsPath() string { return filepath.Join(w.dir, "etc-hosts") }

// pokeDNS asks for the pods' hosts files to be brought up to date.
func (n *Node) pokeDNS() {
	select {
	case n.dnsCh <- struct{}{}:
	default:
	}
}

// dnsRewriteRest is how long the DNS loop rests after a rewrite of the
// hosts files, as a multiple of the time the rewrite took: changes that
// come meanwhile wait for its end, together. The changes of a pod restart
// come in bursts (its deletion, its endpoint going, the new pod, its
// address, its readiness); with 100 pods restarting at once the loop
// rewrote every file several times a second, on the cores the API server
// and the servers share. A rewrite of a few pods' files takes well under a
// millisecond, so a small cluster's names land as soon as before.
const dnsRewriteRest = 4

// dnsLoop rewrites the hosts files of the running pods when pods or
// Services change (then rests, dnsRewriteRest), and every 5 s.
func (n *Node) dnsLoop(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.dnsCh:
		case <-t.C:
		}
		began := time.Now()
		n.mu.Lock()
		ws := make([]*podWorker, 0, len(n.workers))
		for _, w := range n.workers {
			ws = append(ws, w)
		}
		n.mu.Unlock()
		n.dnsMu.Lock()
		files := newHostsFiles(n.dnsView())
		for _, w := range ws {
			if err := w.writeHostsLocked(files); err != nil {
				w.log.Error(err, "Writing /etc/hosts failed")
			}
		}
		n.dnsMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(dnsRewriteRest * time.Since(began)):
		}
	}
}

// openHosts writes the pod's hosts file before its first process starts.
func (w *podWorker) openHosts() error {
	w.n.dnsMu.Lock()
	defer w.n.dnsMu.Unlock()
	w.hostsOpen = true
	err := w.writeHostsLocked(newHostsFiles(w.n.dnsView()))
	w.n.pokeDNS()
	return err
}

// closeHosts stops updates of the pod's hosts file, before its directory
// is removed.
func (w *podWorker) closeHosts() {
	w.n.dnsMu.Lock()
	defer w.n.dnsMu.Unlock()
	w.hostsOpen = false
	w.n.pokeDNS()
}

// writeHostsLocked writes the pod's hosts file if it changed, in place:
// the file is bind-mounted into the pod's processes, and a mount follows
// the inode, so a renamed new file would not reach them. The content is
// written over the old, then cut to length, and the modification time
// set strictly later than the last, so the Go resolver (which re-reads
// /etc/hosts when its size or time changed, at most every 5 s) sees every
// change. Called with n.dnsMu held.
func (w *podWorker) writeHostsLocked(files *hostsFiles) error {
	if !w.hostsOpen {
		return nil
	}
	w.mu.Lock()
	ip, hostname, subdomain, aliases := w.ip, w.pod.Spec.Hostname, w.pod.Spec.Subdomain, w.pod.Spec.HostAliases
	w.mu.Unlock()
	if hostname == "" {
		hostname = w.name
	}
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	data := files.file(w.ns, ip, strings.ToLower(hostname), strings.ToLower(subdomain), aliases...)
	if bytes.Equal(data, w.hostsData) {
		return nil
	}
	f, err := os.OpenFile(w.hostsPath(), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	mtime := time.Now()
	if !mtime.After(w.hostsTime) {
		mtime = w.hostsTime.Add(time.Microsecond)
	}
	if err := os.Chtimes(w.hostsPath(), mtime, mtime); err != nil {
		return err
	}
	w.hostsData, w.hostsTime = data, mtime
	return nil
}
