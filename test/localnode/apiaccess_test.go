package localnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// A pod reaches the API server as in a cluster: the ServiceAccount
// admission plugin's projected volume holds a real token of the pod's
// service account, bound to the pod (the API server's TokenReview accepts
// it), at /var/run/secrets/kubernetes.io/serviceaccount with ca.crt and
// namespace, and KUBERNETES_SERVICE_HOST and _PORT name the API server.
func TestPodsGetAServiceAccountTokenAndTheAPIServerAddress(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	node := startNode(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "api-access"
	createNamespace(t, client, ns)
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "reader",
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:    "sh",
				Image:   "busybox",
				Command: []string{"sh", "-c", "echo api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; echo ns=$(cat " + dir + "/namespace); echo ca=$(grep -c BEGIN " + dir + "/ca.crt); echo token=$(cat " + dir + "/token); sleep 3600"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vol bool
	for _, v := range pod.Spec.Volumes {
		vol = vol || (v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-"))
	}
	if !vol {
		t.Fatalf("the ServiceAccount admission plugin added no kube-api-access volume: %+v", pod.Spec.Volumes)
	}
	got := map[string]string{}
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "the container to print what it sees", func() error {
		b, _ := os.ReadFile(node.ContainerLogPath(ns, "reader", "sh"))
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "localnode:") {
				got[k] = v
			}
		}
		if got["token"] == "" {
			return errors.New("no token line yet: " + string(b))
		}
		return nil
	})
	if want := strings.TrimPrefix(env.Config.Host, "https://"); got["api"] != want {
		t.Errorf("KUBERNETES_SERVICE_HOST:PORT = %q, want the API server's %q", got["api"], want)
	}
	if got["ns"] != ns || got["ca"] == "0" || got["ca"] == "" {
		t.Errorf("namespace file %q (want %q), ca.crt certificates %q (want the kube-root-ca.crt bundle)", got["ns"], ns, got["ca"])
	}
	review, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: got["token"]}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := review.Status
	if !st.Authenticated || st.User.Username != fmt.Sprintf("system:serviceaccount:%s:reader", ns) {
		t.Fatalf("the token authenticates %v as %q (%s), want system:serviceaccount:%s:reader", st.Authenticated, st.User.Username, st.Error, ns)
	}
	if bound := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(bound) != 1 || bound[0] != "reader" {
		t.Errorf("the token is bound to pod %v, want reader", bound)
	}
}
