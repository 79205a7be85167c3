package kubectlnats

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/internal/version"
)

// versionCommand prints the plugin's own version, commit, Go version and
// platform (internal/version). It reads no kubeconfig and asks no cluster.
func versionCommand(s IO) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and commit",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := version.Get()
			switch output {
			case "":
				fmt.Fprintln(s.Out, info.String())
			case "json":
				b, _ := json.MarshalIndent(info, "", "  ")
				fmt.Fprintln(s.Out, string(b))
			case "yaml":
				b, _ := yaml.Marshal(info)
				fmt.Fprint(s.Out, string(b))
			default:
				return fmt.Errorf("-o %q: want json or yaml", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}
