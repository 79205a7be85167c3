package kubectlnats

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// action is one of the commands that set what the controller honours: a
// one-shot annotation or spec.rollout.paused.
type action struct {
	use, short string
	args       int
	// patch is the merge patch of the NatsCluster for args.
	patch func(args []string, resetJetStream bool) (map[string]any, error)
	// atStake says the command needs confirmation (--yes).
	atStake bool
}

func annotationPatch(k, v string) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": map[string]any{k: v}}}
}

func actionCommands(ctx context.Context, flags *genericclioptions.ConfigFlags, s IO) []*cobra.Command {
	actions := []action{
		{use: "restart-all NAME", short: "Restart every server together (annotation " + clusterv1beta1.AnnotationRestartAll + "): an outage", args: 1, atStake: true,
			patch: func(_ []string, reset bool) (map[string]any, error) {
				v := "true"
				if reset {
					v = clusterv1beta1.RestartAllResetJetStream
				}
				return annotationPatch(clusterv1beta1.AnnotationRestartAll, v), nil
			}},
		{use: "force-step NAME SERVER", short: "Take SERVER's next step through a closed gate or a pause (annotation " + clusterv1beta1.AnnotationForceStep + ")", args: 2, atStake: true,
			patch: func(args []string, _ bool) (map[string]any, error) {
				if _, ok := render.ServerOrdinal(args[0], args[1]); !ok {
					return nil, fmt.Errorf("%s is not a server of NatsCluster %s (want %s-<ordinal>)", args[1], args[0], args[0])
				}
				return annotationPatch(clusterv1beta1.AnnotationForceStep, args[1]), nil
			}},
		{use: "pause NAME", short: "Set spec.rollout.paused: no further step starts", args: 1,
			patch: func([]string, bool) (map[string]any, error) {
				return map[string]any{"spec": map[string]any{"rollout": map[string]any{"paused": true}}}, nil
			}},
		{use: "resume NAME", short: "Clear spec.rollout.paused: the rollout goes on", args: 1,
			patch: func([]string, bool) (map[string]any, error) {
				return map[string]any{"spec": map[string]any{"rollout": map[string]any{"paused": false}}}, nil
			}},
	}
	var cmds []*cobra.Command
	for _, a := range actions {
		var yes, reset bool
		cmd := &cobra.Command{
			Use: a.use, Short: a.short, Args: cobra.ExactArgs(a.args),
			RunE: func(cmd *cobra.Command, args []string) error {
				return runAction(ctx, flags, s, a, args, yes, reset)
			},
		}
		if a.atStake {
			cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
		}
		if strings.HasPrefix(a.use, "restart-all") {
			cmd.Flags().BoolVar(&reset, "reset-jetstream", false, "accept that JetStream starts empty (streams left on the volumes, unreachable) when the system account changes")
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// runAction previews what the controller will do once the patch is
// applied (its own decide phase), asks for confirmation when data is at
// stake, and patches.
func runAction(ctx context.Context, flags *genericclioptions.ConfigFlags, s IO, a action, args []string, yes, reset bool) error {
	patch, err := a.patch(args, reset)
	if err != nil {
		return err
	}
	c, err := newClients(flags)
	if err != nil {
		return err
	}
	cfg, ns, nats := c.cfg, c.ns, c.nats
	name := args[0]
	clusters := nats.ClusterV1beta1().NatsClusters(ns)
	nc, err := clusters.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	body, _ := json.Marshal(patch)
	// What the controller decides with the patch applied.
	preview, err := clusters.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err
	}
	preview.Status = nc.Status
	fmt.Fprintln(s.Out, fill("NatsCluster ", ns+"/"+name+": "+describePatch(patch), planWidth))
	if pv, err := livePreviewer(ctx, cfg, ns); err == nil {
		p, err := pv.Decide(ctx, preview, metav1.Now())
		pv.stop()
		if err == nil {
			printVerdict(s.Out, "the controller will: ", Judge(p.Decision))
		}
	}
	if a.atStake && !yes {
		if !s.IsTTY {
			fmt.Fprintln(s.Err, fill("error: ", "this restarts servers and may put data at stake; not confirmed: stdin is not a terminal, give --yes to go ahead", planWidth))
			return &exitError{ExitRefused}
		}
		fmt.Fprint(s.Out, "Go ahead? [y/N] ")
		line, _ := bufio.NewReader(s.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(s.Err, "not confirmed: nothing changed")
			return &exitError{ExitRefused}
		}
	}
	if _, err := clusters.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kubectl-nats"}); err != nil {
		return err
	}
	fmt.Fprintln(s.Out, "done")
	return nil
}

func describePatch(p map[string]any) string {
	if md, ok := p["metadata"].(map[string]any); ok {
		for k, v := range md["annotations"].(map[string]any) {
			return fmt.Sprintf("annotate %s=%v", k, v)
		}
	}
	paused := p["spec"].(map[string]any)["rollout"].(map[string]any)["paused"]
	return fmt.Sprintf("set spec.rollout.paused=%v", paused)
}
