package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/test/localnode/internal/podns"
)

// Options configure a Node. Only Root is required.
type Options struct {
	// Root holds pod directories (pods/), claim directories (pvc/) and
	// container logs (logs/). Claim directories outlive pods and nodes.
	Root string
	// NodeName is the name of the Node object; default "localnode".
	NodeName string
	// Labels are added to the Node's (kubernetes.io/hostname and the
	// others it always has), and Taints are its taints. A pending pod is
	// bound only when its nodeSelector matches the labels and it tolerates
	// every NoSchedule and NoExecute taint, as the scheduler would; else it
	// stays Pending, PodScheduled False Unschedulable.
	Labels map[string]string
	Taints []corev1.Taint
	// BinaryForVersion returns the nats-server binary of a version such as
	// "2.15.1"; default TestbinBinary (hack/testbin.sh nats <version>).
	BinaryForVersion func(version string) (string, error)
	// ExporterBinary returns the prometheus-nats-exporter binary that
	// containers of a prometheus-nats-exporter image run, whatever their
	// tag; default TestbinExporter (hack/testbin.sh exporter, built from
	// the source vendored in third_party/prometheus-nats-exporter).
	ExporterBinary func() (string, error)
	// Images maps an image repository (ghcr.io/nats-operator/nats-operator)
	// to a local binary that containers of any tag of it run, standing for
	// an image built from a checkout: without a command, the binary with
	// the container's args (an image whose entrypoint is the binary, as
	// the Dockerfile's); a command word naming the binary's base name
	// (/nats-operator) becomes the binary.
	Images map[string]string
	// ImageArchives maps an image repository to an OCI image archive
	// (internal/image.WriteArchive) that containers of any tag of it run
	// from: the node unpacks the image's layers once, into
	// Root/images/<digest>/rootfs (kept for later nodes on the same
	// Root), and runs the program of the image's entrypoint (or the
	// container's command), a file of that rootfs, as a local process
	// with the container's args (else the image's cmd) and env; it must
	// run on this machine as it is, as the static binary of the
	// controller's image does. A reference with a digest other than the
	// archive's image's is not pulled (ErrImagePull); imageID is
	// <repository>@<the image's digest>. A repository may not be in both
	// Images and ImageArchives.
	ImageArchives map[string]string
	// BackoffBase and BackoffMax bound the restart backoff of a container:
	// the first restart is immediate, then BackoffBase doubling up to
	// BackoffMax; default 1s and 30s (the kubelet uses 10s and 5m).
	BackoffBase, BackoffMax time.Duration
	// BackoffReset is how long a container must run for its backoff to
	// start over; default 10m as in the kubelet.
	BackoffReset time.Duration
	// SyncPeriod is how often ConfigMap, Secret and downward API volumes are
	// compared with their sources; default 1s.
	SyncPeriod time.Duration
	// StopSignalDelay is the pause between the end of a preStop hook and
	// SIGTERM, standing for the container runtime's latency; default
	// 250ms. nats-server enters lame duck mode in a goroutine after the
	// hook's signal, and takes a SIGTERM that comes first as a plain
	// shutdown.
	StopSignalDelay time.Duration
}

// Node plays the kubelet for one Node object: it binds pending pods to it
// and runs their containers as local processes.
type Node struct {
	opts   Options
	client kubernetes.Interface
	log    klog.Logger

	addrs    *addresses
	spawner  *spawner
	binaries *binaries
	exporter *binaries
	mapped   *binaries
	archives *archives
	// apiHost and apiPort are the API server's address, given to pods as
	// KUBERNETES_SERVICE_HOST and _PORT: there is no kube-proxy to carry
	// the kubernetes Service's virtual IP there.
	apiHost, apiPort string

	factory    informers.SharedInformerFactory
	pods       listerscorev1.PodLister
	configMaps listerscorev1.ConfigMapLister
	secrets    listerscorev1.SecretLister
	claims     listerscorev1.PersistentVolumeClaimLister
	services   listerscorev1.ServiceLister

	// nsMode is how each process gets its own mount namespace, with the
	// pod's /etc/hosts and resolvConf as /etc/resolv.conf (dns.go).
	nsMode     podns.Mode
	resolvConf string
	// dnsCh asks dnsLoop to rewrite the hosts files; dnsMu serialises
	// their writes.
	dnsCh chan struct{}
	dnsMu sync.Mutex

	// resizeMu serialises claim growth (resize.go) between the resizer
	// and pod workers mounting a claim.
	resizeMu sync.Mutex

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// finished holds the pods whose worker has ended, so late events do
	// not start them again.
	finished map[types.UID]bool
	wg       sync.WaitGroup
	cancel   context.CancelFunc
	stopped  chan struct{}
	started  bool
}

// New returns a node that talks to the API server of cfg. Call Start or Run.
func New(cfg *rest.Config, opts Options) (*Node, error) {
	if opts.Root == "" {
		return nil, errors.New("localnode: Options.Root is required")
	}
	if opts.NodeName == "" {
		opts.NodeName = "localnode"
	}
	if opts.BinaryForVersion == nil {
		opts.BinaryForVersion = TestbinBinary
	}
	if opts.ExporterBinary == nil {
		opts.ExporterBinary = TestbinExporter
	}
	if opts.BackoffBase == 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffMax == 0 {
		opts.BackoffMax = 30 * time.Second
	}
	if opts.BackoffReset == 0 {
		opts.BackoffReset = 10 * time.Minute
	}
	if opts.SyncPeriod == 0 {
		opts.SyncPeriod = time.Second
	}
	if opts.StopSignalDelay == 0 {
		opts.StopSignalDelay = 250 * time.Millisecond
	}
	for repo := range opts.ImageArchives {
		if _, ok := opts.Images[repo]; ok {
			return nil, fmt.Errorf("localnode: image repository %q is in both Options.Images and Options.ImageArchives", repo)
		}
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	for _, d := range []string{"pods", "pvc", "logs", "images"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	// In protobuf, as a kubelet talks to the API server.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mode, err := podNSMode()
	if err != nil {
		return nil, fmt.Errorf("localnode: each pod needs a mount namespace of its own for its /etc/hosts "+
			"(run as root, or where unprivileged user namespaces are allowed): %w", err)
	}
	addrs, err := newAddresses()
	if err != nil {
		return nil, err
	}
	n := &Node{
		opts:     opts,
		client:   client,
		log:      klog.Background().WithName("localnode").WithValues("node", opts.NodeName),
		addrs:    addrs,
		spawner:  newSpawner(),
		binaries: &binaries{find: opts.BinaryForVersion, paths: map[string]string{}, digests: map[string]string{}},
		exporter: &binaries{find: func(string) (string, error) { return opts.ExporterBinary() }, paths: map[string]string{}, digests: map[string]string{}},
		mapped:   &binaries{find: opts.mappedBinary, paths: map[string]string{}, digests: map[string]string{}},
		archives: newArchives(root, opts.ImageArchives),
		workers:  map[types.UID]*podWorker{},
		finished: map[types.UID]bool{},
		stopped:  make(chan struct{}),
		nsMode:   mode,
		dnsCh:    make(chan struct{}, 1),
	}
	if n.apiHost, n.apiPort, err = apiAddress(cfg.Host); err != nil {
		addrs.close()
		return nil, err
	}
	if err := n.writeResolvConf(); err != nil {
		addrs.close()
		return nil, err
	}
	n.factory = informers.NewSharedInformerFactory(client, 0)
	n.pods = n.factory.Core().V1().Pods().Lister()
	n.configMaps = n.factory.Core().V1().ConfigMaps().Lister()
	n.secrets = n.factory.Core().V1().Secrets().Lister()
	n.claims = n.factory.Core().V1().PersistentVolumeClaims().Lister()
	n.services = n.factory.Core().V1().Services().Lister()
	return n, nil
}

// Start registers the node, waits for the caches and starts running pods.
// It returns once the node is Ready; ctx bounds only the start, Stop ends
// the node.
func (n *Node) Start(startCtx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("localnode: already started")
	}
	n.started = true
	n.mu.Unlock()
	ctx, cancel := context.WithCancel(context.WithoutCancel(startCtx))
	n.cancel = cancel
	if err := n.register(startCtx); err != nil {
		cancel()
		return err
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { n.podChanged(ctx, obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			n.podChanged(ctx, obj, true)
		},
	}
	if _, err := n.factory.Core().V1().Pods().Informer().AddEventHandler(handler); err != nil {
		cancel()
		return err
	}
	dnsHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.pokeDNS() },
		UpdateFunc: func(any, any) { n.pokeDNS() },
		DeleteFunc: func(any) { n.pokeDNS() },
	}
	for _, inf := range []cache.SharedIndexInformer{n.factory.Core().V1().Pods().Informer(), n.factory.Core().V1().Services().Informer()} {
		if _, err := inf.AddEventHandler(dnsHandler); err != nil {
			cancel()
			return err
		}
	}
	n.factory.Core().V1().ConfigMaps().Informer()
	n.factory.Core().V1().Secrets().Informer()
	if err := n.startResizer(ctx); err != nil {
		cancel()
		return err
	}
	n.factory.Start(ctx.Done())
	for typ, ok := range n.factory.WaitForCacheSync(startCtx.Done()) {
		if !ok {
			cancel()
			return fmt.Errorf("localnode: cache of %v did not sync", typ)
		}
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.heartbeat(ctx)
	}()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.resync(ctx)
	}()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.dnsLoop(ctx)
	}()
	n.log.Info("Started node", "root", n.opts.Root, "addresses", fmt.Sprintf("127.%d.0.0/16", n.addrs.block), "podNamespaces", n.nsMode.String())
	return nil
}

// Run starts the node and blocks until ctx ends, then stops it.
func (n *Node) Run(ctx context.Context) error {
	if err := n.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	n.Stop()
	return nil
}

// Stop kills every process at once (SIGKILL to each process group), waits
// for the pod workers and releases the address block. The API objects are
// left as they are, as when a kubelet dies.
func (n *Node) Stop() {
	n.mu.Lock()
	if !n.started {
		n.mu.Unlock()
		return
	}
	select {
	case <-n.stopped:
		n.mu.Unlock()
		return
	default:
	}
	close(n.stopped)
	n.mu.Unlock()
	n.spawner.killAll()
	n.cancel()
	n.wg.Wait()
	n.factory.Shutdown()
	n.spawner.killAll()
	n.addrs.close()
	n.log.Info("Stopped node")
}

// PodAddress returns the loopback address of pod name in namespace ns,
// allocating it if the pod was never seen, so a test can know it before the
// pod exists. The pod's DNS names have it (Resolve) only while the pod is an
// endpoint of their Service.
func (n *Node) PodAddress(ns, name string) string {
	return n.addrs.get(ns, name)
}

// LogPath returns the log file of the nats container of a pod.
func (n *Node) LogPath(ns, pod string) string {
	return n.ContainerLogPath(ns, pod, "nats")
}

// ContainerLogPath returns the log file of one container of a pod. Output
// of every run of the container is appended, with a "localnode:" line at
// each start and exit.
func (n *Node) ContainerLogPath(ns, pod, container string) string {
	return filepath.Join(n.opts.Root, "logs", fmt.Sprintf("%s_%s_%s.log", ns, pod, container))
}

// ClaimPath returns the directory behind a PersistentVolumeClaim.
func (n *Node) ClaimPath(ns, claim string) string {
	return filepath.Join(n.opts.Root, "pvc", ns, claim)
}

// PIDs returns the pid of every process the node ever started (containers
// and exec hooks and probes), running or not, so a test can check that none
// outlives it.
func (n *Node) PIDs() []int {
	return n.spawner.allPIDs()
}

// ContainerPID returns the pid of the running container of a pod, or 0.
func (n *Node) ContainerPID(ns, pod, container string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.workers {
		if w.ns == ns && w.name == pod {
			if pid := w.containerPID(container); pid != 0 {
				return pid
			}
		}
	}
	return 0
}

// NodeName returns the name of the Node object.
func (n *Node) NodeName() string { return n.opts.NodeName }

// podChanged binds a pending pod, starts a worker for a pod of this node and
// tells the worker of any change.
func (n *Node) podChanged(ctx context.Context, obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp == nil && !deleted && len(pod.Spec.SchedulingGates) == 0 {
			if why := n.unschedulable(pod); why != "" {
				n.markUnschedulable(ctx, pod, why)
				return
			}
			n.bind(ctx, pod)
		}
		return
	}
	if pod.Spec.NodeName != n.opts.NodeName {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.stopped:
		return
	default:
	}
	w, ok := n.workers[pod.UID]
	if !ok {
		if deleted || isTerminal(pod) || n.finished[pod.UID] {
			return
		}
		w = newPodWorker(n, pod)
		n.workers[pod.UID] = w
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			w.run(ctx)
			n.mu.Lock()
			delete(n.workers, pod.UID)
			n.finished[pod.UID] = true
			n.mu.Unlock()
		}()
	}
	w.poke()
}

// resync tells every worker to look again, for pods whose events were
// missed and so deleted pods are noticed.
func (n *Node) resync(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, err := n.pods.List(everything)
		if err != nil {
			continue
		}
		for _, p := range pods {
			n.podChanged(ctx, p, false)
		}
		n.mu.Lock()
		for _, w := range n.workers {
			w.poke()
		}
		n.mu.Unlock()
	}
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// VolumePath returns the local directory of a volume of the running pod
// ns/pod, or "" if the node runs no such pod.
func (n *Node) VolumePath(ns, pod, volume string) string {
	n.mu.Lock()
	var ws []*podWorker
	for _, w := range n.workers {
		if w.ns == ns && w.name == pod {
			ws = append(ws, w)
		}
	}
	n.mu.Unlock()
	for _, w := range ws {
		if w.isTerminating() {
			continue
		}
		p, _ := w.current()
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == volume {
				return w.volumePath(p, &p.Spec.Volumes[i])
			}
		}
	}
	return ""
}
