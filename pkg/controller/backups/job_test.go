package backups

import (
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A backup's Job runs the controller's image as `nats-operator backup`
// against every server by its stable name, writing under
// /backup/<subPath>/<its Job name>, with the creds file mounted when
// given, the report as its termination message, as a restricted pod
// without a token; a scheduled backup is a CronJob of the same Job that
// never runs twice at once; a restore's Job reads the run's directory.
// Every Job's pods carry the cluster's name under render.LabelJobOf, which
// the cluster's NetworkPolicy admits to the client port.
func TestJobsRunTheControllersImageAgainstEveryServer(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	b := &clusterv1beta1.NatsBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", UID: "0123456789"},
		Spec: clusterv1beta1.NatsBackupSpec{Cluster: "demo", Streams: []string{"ORDERS", "EVENTS"},
			Credentials: &clusterv1beta1.SecretKeySelector{Name: "app-creds"},
			Volume:      clusterv1beta1.BackupVolume{ClaimName: "backups", SubPath: "demo/nightly"}},
	}
	j := BackupJob(b, nc, "example.com/nats-operator:test")
	if j.Name != "nightly-01234" || !metav1.IsControlledBy(j, b) || *j.Spec.BackoffLimit != 0 {
		t.Errorf("Job %s, owners %+v, backoffLimit %d", j.Name, j.OwnerReferences, *j.Spec.BackoffLimit)
	}
	pod := j.Spec.Template.Spec
	c := pod.Containers[0]
	want := []string{"backup",
		"--servers=nats://demo-0-0.demo-headless.ns.svc:4222,nats://demo-1-0.demo-headless.ns.svc:4222,nats://demo-2-0.demo-headless.ns.svc:4222",
		"--dir=/backup/demo/nightly/$(JOB_NAME)", "--report=/report/termination-log", "--streams=ORDERS,EVENTS", "--creds=/creds/user.creds"}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args\n%q\nwant\n%q", c.Args, want)
	}
	if c.Image != "example.com/nats-operator:test" || c.TerminationMessagePath != "/report/termination-log" {
		t.Errorf("image %s, terminationMessagePath %s", c.Image, c.TerminationMessagePath)
	}
	if *pod.AutomountServiceAccountToken || !*pod.SecurityContext.RunAsNonRoot || !*c.SecurityContext.ReadOnlyRootFilesystem || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Error("the Job's pod is not restricted")
	}
	var vols []string
	for _, v := range pod.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			vols = append(vols, "claim "+v.PersistentVolumeClaim.ClaimName)
		case v.Secret != nil:
			vols = append(vols, "secret "+v.Secret.SecretName+" "+v.Secret.Items[0].Key)
		case v.EmptyDir != nil:
			vols = append(vols, "emptyDir "+v.Name)
		}
	}
	if got := strings.Join(vols, "; "); got != "claim backups; emptyDir report; secret app-creds user.creds" {
		t.Errorf("volumes: %s", got)
	}
	admitted := func(what string, l map[string]string) {
		t.Helper()
		for k, v := range render.JobPodLabels("demo") {
			if l[k] != v {
				t.Errorf("%s: pod labels %v have no %s=%s: the NetworkPolicy would not admit them", what, l, k, v)
			}
		}
		if _, ok := l[clusterv1beta1.LabelCluster]; ok {
			t.Errorf("%s: pod labels %v select it as a server", what, l)
		}
	}
	admitted("backup Job", j.Spec.Template.Labels)

	b.Spec.Schedule = "0 3 * * *"
	cj := BackupCronJob(b, nc, "example.com/nats-operator:test")
	if cj.Spec.Schedule != "0 3 * * *" || cj.Spec.ConcurrencyPolicy != "Forbid" || !slices.Equal(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, want) {
		t.Errorf("CronJob %+v", cj.Spec)
	}
	admitted("CronJob", cj.Spec.JobTemplate.Spec.Template.Labels)

	r := &clusterv1beta1.NatsRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "back"},
		Spec: clusterv1beta1.NatsRestoreSpec{Cluster: "demo", Backup: "nightly", Overwrite: true}}
	rj := RestoreJob(r, nc, "backups", RunPath(b, "nightly-29400000"), "img")
	if got := rj.Spec.Template.Spec.Containers[0].Args; got[0] != "restore" || got[2] != "--dir=/backup/demo/nightly/nightly-29400000" || !slices.Contains(got, "--overwrite") || slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--creds") }) {
		t.Errorf("restore args %q", got)
	}
	admitted("restore Job", rj.Spec.Template.Labels)
}

// The Jobs run the image the Deployment runs: DefaultImage is the image of
// manifests/controller/operator.yaml, which also passes it as --job-image.
func TestDefaultImageIsTheDeploymentsImage(t *testing.T) {
	b, err := os.ReadFile("../../../manifests/controller/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"image: " + DefaultImage + "\n", "--job-image=" + DefaultImage + " "} {
		if !strings.Contains(text, want) {
			t.Errorf("manifests/controller/operator.yaml has no %q", want)
		}
	}
}
