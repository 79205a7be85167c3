package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CertManagerDirEnv, when set, names a directory laid out as the one
// hack/testbin.sh cert-manager prints (cert-manager-controller and crds/);
// the script is then not run.
const CertManagerDirEnv = "NATS_OPERATOR_CERT_MANAGER_DIR"

// CertManagerDir returns the directory holding the cert-manager controller
// binary and its CRDs (crds/*.yaml), building them on first use with
// hack/testbin.sh cert-manager (about 8 minutes cold, seconds with a warm Go
// build cache, nothing once cached).
func CertManagerDir() (string, error) {
	if dir := os.Getenv(CertManagerDirEnv); dir != "" {
		return dir, nil
	}
	dir, err := testbin("cert-manager")
	if err != nil {
		return "", fmt.Errorf("building cert-manager: %w", err)
	}
	return dir, nil
}

// CertManagerOptions choose how cert-manager runs.
type CertManagerOptions struct {
	// Namespace limits the controllers to one namespace (--namespace);
	// empty watches all of them. ClusterIssuers are not served when set.
	Namespace string
	// ClusterResourceNamespace holds the Secrets ClusterIssuers refer to
	// (--cluster-resource-namespace); default "cert-manager". It is created
	// when missing.
	ClusterResourceNamespace string
	// Args are added to the controller's command line, e.g. "-v=4".
	Args []string
}

// CertManager is cert-manager's controller process running against the
// control plane.
type CertManager struct {
	// Dir holds cert-manager-controller and crds/.
	Dir string
	// LogPath is the controller's log, kept with the other logs when the
	// test fails.
	LogPath string
	// ClusterResourceNamespace is the namespace of ClusterIssuers' Secrets.
	ClusterResourceNamespace string
}

// certManagerReadyLine is what hack/cert-manager-controller logs once its
// informer caches have synced.
const certManagerReadyLine = "informer caches synced; controllers running"

// StartCertManager installs cert-manager's CRDs (Certificates,
// CertificateRequests, Issuers, ClusterIssuers, Orders, Challenges) and
// runs its controller as a local process with the administrator's
// kubeconfig, until its informers have synced. Stop (or the test's cleanup)
// stops it first, before the control plane; its log is in LogPaths.
//
// It runs the controllers for Certificates, CertificateRequests (approver,
// CA and SelfSigned issuers), Issuers and ClusterIssuers. No webhook and no
// cainjector run, and none is needed for these: objects are checked only
// against the CRDs' schemas, not by cert-manager's validating webhook.
//
// The CRDs are installed after the kube-controller-manager started (when
// Options.ControllerManager is set), so its garbage collector learns of
// cert-manager's kinds up to 30 s late: an object owned by a Certificate
// may outlive it by that long.
func (e *Env) StartCertManager(ctx context.Context, opts CertManagerOptions) (*CertManager, error) {
	dir, err := CertManagerDir()
	if err != nil {
		return nil, err
	}
	if err := e.InstallCRDs(ctx, filepath.Join(dir, "crds")); err != nil {
		return nil, fmt.Errorf("installing cert-manager's CRDs: %w", err)
	}
	cm := &CertManager{Dir: dir, ClusterResourceNamespace: opts.ClusterResourceNamespace}
	if cm.ClusterResourceNamespace == "" {
		cm.ClusterResourceNamespace = "cert-manager"
	}
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cm.ClusterResourceNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--leader-elect=false",
		"--cluster-resource-namespace=" + cm.ClusterResourceNamespace,
	}
	if opts.Namespace != "" {
		args = append(args, "--namespace="+opts.Namespace)
	}
	args = append(args, opts.Args...)
	var p *process
	err = e.startRetrying(ctx, "cert-manager", func() (*process, error) {
		var err error
		p, err = startProcess("cert-manager", e.Dir, filepath.Join(dir, "cert-manager-controller"), args...)
		return p, err
	}, func(context.Context) error {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), certManagerReadyLine) {
			return errors.New("informer caches not synced yet")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cm.LogPath = p.logPath
	e.logf("cert-manager running (log %s)", cm.LogPath)
	return cm, nil
}
