package crd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/pkg/kubectlnats"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// The kubectl plugin's commands that only read and write the NatsCluster
// (restart-all, force-step, pause, resume, status), run as a user runs them
// (kubectlnats.Run with a kubeconfig and -n) against this package's real
// kube-apiserver, with the CRDs installed and no controller: what each
// writes is read back from the API server, what it prints and its exit
// code are checked. No nats-server runs, so status says the servers'
// reports are not reachable; what the controller then does with the
// annotations and fields is tested in test/e2e.

// pluginOutput is a buffer the plugin writes to while the test reads it.
type pluginOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *pluginOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *pluginOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// plugin runs kubectl nats in namespace ns of the package's API server;
// stdin is in, a terminal when tty.
func plugin(ctx context.Context, ns string, in string, tty bool, args ...string) (stdout, stderr string, code int) {
	var out, errOut pluginOutput
	code = kubectlnats.Run(ctx, append([]string{"--kubeconfig", env.KubeconfigPath, "-n", ns}, args...),
		kubectlnats.IO{In: strings.NewReader(in), Out: &out, Err: &errOut, IsTTY: tty})
	return out.String(), errOut.String(), code
}

// exampleCluster creates the NatsCluster of manifests/examples/<file> in a
// namespace of its own and returns the namespace. No controller runs: the
// NatsCluster has no status and no server.
func exampleCluster(t *testing.T, prefix, file string) (string, *clusterv1beta1.NatsCluster) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "manifests", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	var nc *clusterv1beta1.NatsCluster
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var c clusterv1beta1.NatsCluster
		if err := yaml.Unmarshal([]byte(doc), &c); err == nil && c.Kind == "NatsCluster" {
			nc = &c
		}
	}
	if nc == nil {
		t.Fatalf("%s holds no NatsCluster", file)
	}
	ns := newNamespace(t, prefix)
	created, err := natsClient().ClusterV1beta1().NatsClusters(ns).Create(context.Background(), nc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns, created
}

func natsClient() versioned.Interface { return versioned.NewForConfigOrDie(env.Config) }

func getCluster(t *testing.T, ns, name string) *clusterv1beta1.NatsCluster {
	t.Helper()
	nc, err := natsClient().ClusterV1beta1().NatsClusters(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// Each action writes, with --yes where it asks for it, exactly what the
// controller honours on the NatsCluster, says what it writes and what the
// controller's decide phase makes of it, and says done.
func TestPluginActionsWriteWhatTheControllerHonours(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		args []string
		// say is the line naming what is written.
		say string
		// check reads the written NatsCluster.
		check func(*clusterv1beta1.NatsCluster) error
	}{
		{[]string{"restart-all", "demo", "--yes"}, "annotate " + clusterv1beta1.AnnotationRestartAll + "=true",
			annotated(clusterv1beta1.AnnotationRestartAll, "true")},
		{[]string{"restart-all", "demo", "--reset-jetstream", "--yes"}, "annotate " + clusterv1beta1.AnnotationRestartAll + "=" + clusterv1beta1.RestartAllResetJetStream,
			annotated(clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream)},
		{[]string{"force-step", "demo", "demo-1", "-y"}, "annotate " + clusterv1beta1.AnnotationForceStep + "=demo-1",
			annotated(clusterv1beta1.AnnotationForceStep, "demo-1")},
		{[]string{"pause", "demo"}, "set spec.rollout.paused=true", paused(true)},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			ns, before := exampleCluster(t, "plugin-action", "natscluster-jetstream.yaml")
			out, errOut, code := plugin(ctx, ns, "", false, tt.args...)
			t.Logf("kubectl nats %s (exit %d):\n%s%s", strings.Join(tt.args, " "), code, out, errOut)
			if code != kubectlnats.ExitOK {
				t.Fatalf("exit %d, want 0; stderr %q", code, errOut)
			}
			for _, want := range []string{"NatsCluster " + ns + "/demo: " + tt.say + "\n", "\nthe controller will: ", "\n  reason:  ", "\ndone\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			nc := getCluster(t, ns, "demo")
			if err := tt.check(nc); err != nil {
				t.Error(err)
			}
			if nc.ResourceVersion == before.ResourceVersion {
				t.Error("the NatsCluster's resourceVersion did not change: nothing was written")
			}
			if nc.ManagedFields[len(nc.ManagedFields)-1].Manager != "kubectl-nats" {
				t.Errorf("the last writer is %q, want kubectl-nats", nc.ManagedFields[len(nc.ManagedFields)-1].Manager)
			}
		})
	}

	// resume clears what pause set, and writes nothing else.
	t.Run("pause then resume", func(t *testing.T) {
		t.Parallel()
		ns, _ := exampleCluster(t, "plugin-resume", "natscluster-jetstream.yaml")
		if _, errOut, code := plugin(ctx, ns, "", false, "pause", "demo"); code != kubectlnats.ExitOK {
			t.Fatalf("pause: exit %d: %s", code, errOut)
		}
		paused := getCluster(t, ns, "demo")
		out, errOut, code := plugin(ctx, ns, "", false, "resume", "demo")
		if code != kubectlnats.ExitOK || !strings.Contains(out, "NatsCluster "+ns+"/demo: set spec.rollout.paused=false\n") || !strings.HasSuffix(out, "done\n") {
			t.Fatalf("resume: exit %d, stdout\n%s\nstderr %s", code, out, errOut)
		}
		resumed := getCluster(t, ns, "demo")
		if resumed.Spec.Rollout.Paused {
			t.Error("spec.rollout.paused is still true after resume")
		}
		paused.Spec.Rollout.Paused = false
		if !reflect.DeepEqual(paused.Spec, resumed.Spec) || !reflect.DeepEqual(paused.Annotations, resumed.Annotations) {
			t.Errorf("resume changed more than spec.rollout.paused:\nbefore %+v\nafter  %+v", paused.Spec, resumed.Spec)
		}
	})
}

func annotated(key, value string) func(*clusterv1beta1.NatsCluster) error {
	return func(nc *clusterv1beta1.NatsCluster) error {
		if got, ok := nc.Annotations[key]; !ok || got != value {
			return errors.New("annotation " + key + " is " + quoteOrAbsent(got, ok) + ", want " + value)
		}
		return nil
	}
}

func paused(want bool) func(*clusterv1beta1.NatsCluster) error {
	return func(nc *clusterv1beta1.NatsCluster) error {
		if nc.Spec.Rollout.Paused != want {
			return errors.New("spec.rollout.paused is not as the command set it")
		}
		return nil
	}
}

// words is s with every run of spaces and line breaks made one space.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

func quoteOrAbsent(s string, ok bool) string {
	if !ok {
		return "absent"
	}
	return `"` + s + `"`
}

// A command that restarts servers asks first: without --yes and without a
// terminal it refuses with exit code 4 and writes nothing; on a terminal a
// "n" refuses the same, and a "y" goes ahead.
func TestPluginRefusesWithoutConfirmation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		args []string
		in   string
		tty  bool
		// code is the exit code; key the annotation the command writes.
		code int
		key  string
		// stderr is what it says on stderr; stdout on stdout.
		stderr, stdout string
	}{
		{"restart-all without --yes, no terminal", []string{"restart-all", "demo"}, "", false,
			kubectlnats.ExitRefused, clusterv1beta1.AnnotationRestartAll, "give --yes to go ahead", ""},
		{"restart-all --reset-jetstream without --yes, no terminal", []string{"restart-all", "demo", "--reset-jetstream"}, "y\n", false,
			kubectlnats.ExitRefused, clusterv1beta1.AnnotationRestartAll, "give --yes to go ahead", ""},
		{"force-step without --yes, no terminal", []string{"force-step", "demo", "demo-2"}, "", false,
			kubectlnats.ExitRefused, clusterv1beta1.AnnotationForceStep, "not confirmed: stdin is not a terminal", ""},
		{"restart-all on a terminal, answered n", []string{"restart-all", "demo"}, "n\n", true,
			kubectlnats.ExitRefused, clusterv1beta1.AnnotationRestartAll, "not confirmed: nothing changed", "Go ahead? [y/N] "},
		{"restart-all on a terminal, answered with Enter", []string{"restart-all", "demo"}, "\n", true,
			kubectlnats.ExitRefused, clusterv1beta1.AnnotationRestartAll, "not confirmed: nothing changed", "Go ahead? [y/N] "},
		{"force-step on a terminal, answered yes", []string{"force-step", "demo", "demo-2"}, "yes\n", true,
			kubectlnats.ExitOK, clusterv1beta1.AnnotationForceStep, "", "Go ahead? [y/N] done\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns, before := exampleCluster(t, "plugin-confirm", "natscluster-jetstream.yaml")
			out, errOut, code := plugin(ctx, ns, tt.in, tt.tty, tt.args...)
			t.Logf("kubectl nats %s (exit %d):\nstdout:\n%sstderr:\n%s", strings.Join(tt.args, " "), code, out, errOut)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			// The message is filled to the screen's width: compared word by word.
			if !strings.Contains(words(errOut), tt.stderr) || !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q, stderr %q; want stdout with %q, stderr with %q", out, errOut, tt.stdout, tt.stderr)
			}
			// The preview came first: the user saw what was at stake.
			if !strings.Contains(out, "the controller will: ") {
				t.Errorf("no preview before the question:\n%s", out)
			}
			nc := getCluster(t, ns, "demo")
			_, written := nc.Annotations[tt.key]
			switch {
			case tt.code == kubectlnats.ExitRefused && (written || nc.ResourceVersion != before.ResourceVersion):
				t.Errorf("refused, yet the NatsCluster was written (annotations %v, resourceVersion %s -> %s)", nc.Annotations, before.ResourceVersion, nc.ResourceVersion)
			case tt.code == kubectlnats.ExitOK && !written:
				t.Errorf("confirmed, yet annotation %s is absent", tt.key)
			}
		})
	}
}

// status -o json and -o yaml parse back into the plugin's StatusView, with
// the NatsCluster's status as the API server has it (conditions, rollout,
// servers) and its Events; the screen shows the same, within 80 columns.
func TestPluginStatusPrintsTheNatsClustersStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, nc := exampleCluster(t, "plugin-status", "natscluster-jetstream.yaml")
	nc = writeStatus(t, nc)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "demo.rolling"},
		InvolvedObject: corev1.ObjectReference{Kind: "NatsCluster", APIVersion: clusterv1beta1.SchemeGroupVersion.String(), Namespace: ns, Name: "demo", UID: nc.UID},
		Type:           corev1.EventTypeNormal, Reason: "RestartingServer", Message: "restarting demo-2 (revision 0ce3c135e7)",
		LastTimestamp: metav1.Now(), Count: 1, Source: corev1.EventSource{Component: "nats-operator"},
	}
	if _, err := kube.CoreV1().Events(ns).Create(ctx, event, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, o := range []string{"json", "yaml"} {
		out, errOut, code := plugin(ctx, ns, "", false, "status", "demo", "-o", o)
		if code != kubectlnats.ExitOK {
			t.Fatalf("status -o %s: exit %d: %s", o, code, errOut)
		}
		var v kubectlnats.StatusView
		if err := yaml.UnmarshalStrict([]byte(out), &v); err != nil {
			t.Fatalf("status -o %s does not parse into StatusView: %v\n%s", o, err, out)
		}
		if v.Cluster != ns+"/demo" || v.Version != nc.Status.Version || v.Revision != nc.Status.Config.Revision || v.Observed {
			t.Errorf("status -o %s: cluster %q version %q revision %q observed %v", o, v.Cluster, v.Version, v.Revision, v.Observed)
		}
		if !reflect.DeepEqual(v.Rollout, nc.Status.Rollout) {
			t.Errorf("status -o %s: rollout %+v, the NatsCluster has %+v", o, v.Rollout, nc.Status.Rollout)
		}
		if len(v.Conditions) != len(nc.Status.Conditions) {
			t.Errorf("status -o %s: %d conditions, the NatsCluster has %d", o, len(v.Conditions), len(nc.Status.Conditions))
		}
		for i := range min(len(v.Conditions), len(nc.Status.Conditions)) {
			got, want := v.Conditions[i], nc.Status.Conditions[i]
			if got.Type != want.Type || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
				t.Errorf("status -o %s: condition %+v, the NatsCluster has %+v", o, got, want)
			}
		}
		var servers []string
		for _, s := range v.Servers {
			servers = append(servers, s.Name+"/"+s.Version+"/"+s.Revision)
		}
		if want := []string{"demo-0/2.15.1/aaaaaaaaaa", "demo-1/2.15.1/aaaaaaaaaa", "demo-2/2.15.2/0ce3c135e7"}; !reflect.DeepEqual(servers, want) {
			t.Errorf("status -o %s: servers %v, want %v", o, servers, want)
		}
		if len(v.Events) != 1 || v.Events[0].Reason != event.Reason || v.Events[0].Message != event.Message {
			t.Errorf("status -o %s: events %+v, want the one Event %s", o, v.Events, event.Reason)
		}
	}

	out, errOut, code := plugin(ctx, ns, "", false, "status", "demo")
	t.Logf("kubectl nats status demo (exit %d):\n%s", code, out)
	if code != kubectlnats.ExitOK {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"NatsCluster " + ns + "/demo  version 2.15.2  revision 0ce3c135e7\n",
		"Progressing  True RollingRestart: restarting demo-2",
		"demo-2     yes   2.15.2   0ce3c135e7      ?      (no report)\n",
		"rollout      to 0ce3c135e7\n", "  updated    demo-2\n", "  pending    demo-1, demo-0\n",
		"  gate       waiting for demo-2 to catch up since ",
		"RestartingServer: restarting demo-2 (revision 0ce3c135e7)\n",
		"not\n reachable from here",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the screen lacks %q", want)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("a line wider than 80 columns: %q", l)
		}
	}

	if _, errOut, code := plugin(ctx, ns, "", false, "status", "absent"); code != kubectlnats.ExitError || !strings.Contains(errOut, `"absent" not found`) {
		t.Errorf("status of a NatsCluster that does not exist: exit %d, %q; want exit 1 saying not found", code, errOut)
	}
}

// writeStatus gives nc the status of a rolling upgrade from 2.15.1 mid-way
// (demo-2 updated, demo-1 and demo-0 pending, the gate waiting), as the
// controller would write it.
func writeStatus(t *testing.T, nc *clusterv1beta1.NatsCluster) *clusterv1beta1.NatsCluster {
	t.Helper()
	since := metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
	nc.Status = clusterv1beta1.NatsClusterStatus{
		ObservedGeneration: nc.Generation, Replicas: 3, ReadyReplicas: 3, Version: "2.15.2",
		Config: &clusterv1beta1.ConfigStatus{Revision: "0ce3c135e7", AppliedBy: clusterv1beta1.AppliedByRestart},
		Conditions: []metav1.Condition{
			{Type: clusterv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllServersReady", Message: "3 of 3 servers ready", LastTransitionTime: since},
			{Type: clusterv1beta1.ConditionSettled, Status: metav1.ConditionFalse, Reason: "GroupsCatchingUp", Message: "demo-2 is catching up on the meta group", LastTransitionTime: since},
			{Type: clusterv1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonRollingRestart, Message: "restarting demo-2, then demo-1, demo-0, one at a time", LastTransitionTime: since},
		},
		Rollout: &clusterv1beta1.RolloutStatus{TargetRevision: "0ce3c135e7", Updated: []string{"demo-2"}, Pending: []string{"demo-1", "demo-0"},
			Gate: &clusterv1beta1.Gate{WaitingFor: "demo-2 to catch up", Since: &since}},
		Servers: []clusterv1beta1.ServerStatus{
			{Name: "demo-0", Version: "2.15.1", Ready: true, ConfigRevision: "aaaaaaaaaa"},
			{Name: "demo-1", Version: "2.15.1", Ready: true, ConfigRevision: "aaaaaaaaaa"},
			{Name: "demo-2", Version: "2.15.2", Ready: true, ConfigRevision: "0ce3c135e7"},
		},
	}
	updated, err := natsClient().ClusterV1beta1().NatsClusters(nc.Namespace).UpdateStatus(context.Background(), nc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return updated
}

// status -w without a terminal prints a screen, then a new one each time
// what it shows changes (here: pause, then resume), and nothing in
// between, though it reads again every 50ms; it stops, exit code 0, when
// its context ends (Ctrl-C). With -o json the screens are JSON documents
// one after the other.
func TestPluginStatusWatchPrintsAScreenPerChange(t *testing.T) {
	t.Parallel()
	for _, output := range []string{"", "json"} {
		t.Run("-o "+output, func(t *testing.T) {
			t.Parallel()
			ns, _ := exampleCluster(t, "plugin-watch", "natscluster-jetstream.yaml")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := []string{"--kubeconfig", env.KubeconfigPath, "-n", ns, "status", "demo", "-w", "--interval", "50ms"}
			if output != "" {
				args = append(args, "-o", output)
			}
			var out, errOut pluginOutput
			done := make(chan int)
			go func() {
				done <- kubectlnats.Run(ctx, args, kubectlnats.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
			}()
			// screens are the screens printed so far, each as a StatusView.
			screens := func() []kubectlnats.StatusView {
				if output == "json" {
					var vs []kubectlnats.StatusView
					dec := json.NewDecoder(strings.NewReader(out.String()))
					for {
						var v kubectlnats.StatusView
						if err := dec.Decode(&v); err != nil {
							if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
								t.Errorf("status -w -o json: %v\n%s", err, out.String())
							}
							return vs
						}
						vs = append(vs, v)
					}
				}
				var vs []kubectlnats.StatusView
				for _, s := range strings.Split(out.String(), strings.Repeat("-", 79)+"\n") {
					if strings.HasPrefix(s, "NatsCluster "+ns+"/demo ") && strings.Contains(s, "\nSERVER ") {
						vs = append(vs, kubectlnats.StatusView{Paused: strings.Contains(s, "\npaused       spec.rollout.paused: no further step starts\n")})
					}
				}
				return vs
			}
			waitScreens := func(n int, paused bool) {
				t.Helper()
				poll.Eventually(t, time.Minute, 100*time.Millisecond, fmt.Sprintf("screen %d (paused %v)", n, paused), func() error {
					if vs := screens(); len(vs) < n || vs[n-1].Paused != paused {
						return errors.New("output so far:\n" + out.String() + errOut.String())
					}
					return nil
				})
			}
			waitScreens(1, false)
			if _, errOut, code := plugin(ctx, ns, "", false, "pause", "demo"); code != kubectlnats.ExitOK {
				t.Fatalf("pause: exit %d: %s", code, errOut)
			}
			waitScreens(2, true)
			if _, errOut, code := plugin(ctx, ns, "", false, "resume", "demo"); code != kubectlnats.ExitOK {
				t.Fatalf("resume: exit %d: %s", code, errOut)
			}
			waitScreens(3, false)
			cancel()
			if code := <-done; code != kubectlnats.ExitOK {
				t.Errorf("status -w stopped with exit %d, want 0; stderr %q", code, errOut.String())
			}
			// Nothing changed but the pause and the resume: three screens.
			if vs := screens(); len(vs) != 3 {
				t.Errorf("%d screens, want 3 (the first, paused, resumed):\n%s", len(vs), out.String())
			}
			t.Logf("kubectl nats status demo -w %s:\n%s", output, out.String())
		})
	}
}
