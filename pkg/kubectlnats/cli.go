package kubectlnats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
)

// IO are the streams a command uses; IsTTY says stdin is a terminal (a
// confirmation can be asked).
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	IsTTY    bool
}

// StdIO is the process's streams.
func StdIO() IO {
	return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, IsTTY: term.IsTerminal(int(os.Stdin.Fd()))}
}

// exitError carries an exit code out of a command.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Run runs kubectl-nats with args (without the program name) and returns
// the exit code.
func Run(ctx context.Context, args []string, s IO) int {
	// The controller's code logs through klog; a plugin prints, it does not log.
	ctx = klog.NewContext(ctx, logr.Discard())
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-nats",
		Short:         "Inspect and steer NatsClusters of nats-operator",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(root.PersistentFlags())
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.AddCommand(statusCommand(ctx, flags, s), planCommand(ctx, flags, s), versionCommand(s))
	root.AddCommand(actionCommands(ctx, flags, s)...)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(s.Err, "error: %v\n", err)
		return ExitError
	}
}

// namespace is -n or the kubeconfig context's namespace.
func namespace(flags *genericclioptions.ConfigFlags) (string, error) {
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// clients are what a live command talks to: the config, its namespace and
// the clientsets.
type clients struct {
	cfg  *rest.Config
	ns   string
	kube kubernetes.Interface
	nats versioned.Interface
}

func newClients(flags *genericclioptions.ConfigFlags) (*clients, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c := &clients{cfg: cfg}
	if c.ns, err = namespace(flags); err != nil {
		return nil, err
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.nats, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func planCommand(ctx context.Context, flags *genericclioptions.ConfigFlags, s IO) *cobra.Command {
	o := planOptions{stdin: s.In}
	cmd := &cobra.Command{
		Use:   "plan -f manifest.yaml [--from old.yaml]",
		Short: "Show what the controller would do with a NatsCluster manifest",
		Long: `plan renders the NatsCluster in the file, diffs each server's nats.conf and
pod template against what runs, and prints the decision the controller would
make, running the controller's own decide phase: against the live cluster,
or with --from against a simulated cluster running old.yaml settled (no
cluster needed).

Exit codes: 0 the change rolls, reloads, scales or there is nothing to do;
2 the controller would hold it; 3 the manifest is invalid; 1 an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.file == "" {
				return fmt.Errorf("-f manifest.yaml is required")
			}
			if o.output != "" && o.output != "json" && o.output != "yaml" {
				return fmt.Errorf("-o %q: want json or yaml", o.output)
			}
			if flags.Namespace != nil && *flags.Namespace != "" {
				o.namespace, o.namespaceGiven = *flags.Namespace, true
			}
			if o.from == "" {
				cfg, err := flags.ToRESTConfig()
				if err != nil {
					return fmt.Errorf("no cluster to plan against (%w): give --from old.yaml for an offline plan", err)
				}
				o.config = cfg
				if o.namespace == "" {
					if o.namespace, err = namespace(flags); err != nil {
						return err
					}
				}
			}
			if code := runPlan(ctx, o, s.Out, s.Err); code != ExitOK {
				return &exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "the manifest with the NatsCluster (- for stdin)")
	cmd.Flags().StringVar(&o.from, "from", "", "plan offline against this manifest, taken as running and settled")
	cmd.Flags().StringArrayVar(&o.streams, "stream", nil, "offline: a stream taken as present, ACCOUNT/NAME ($G without auth); repeatable")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json or yaml")
	return cmd
}
