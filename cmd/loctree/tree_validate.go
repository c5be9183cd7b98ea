package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newTreeValidateCmd() *cobra.Command {
	var file, format string
	cmd := &cobra.Command{
		Use:   "validate [-f TOPOLOGY|DIR]",
		Short: "Check a topology as the agent would load it, without writing a tree",
		Long: `Validate reads a topology file, or a directory of topology files (*.json,
*.yaml, *.yml) as loctree agent -f DIR reads it, builds its tree as tree build
does and prints what the agent would install. Nothing is written. A topology
the agent would refuse fails here with the same error (file and line).

Examples:
  loctree tree validate -f examples/mesh.yaml
  loctree tree validate -f /etc/loctree/topology.d -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "text", "json", "yaml"); err != nil {
				return err
			}
			t, name, err := buildTopology(file, 1, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			sum := summarize(t, name)
			if isData(format) {
				return writeData(cmd.OutOrStdout(), format, sum)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid: %s\n", safe(name), sum.text())
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology file or directory of them (default: the embedded examples/mesh.yaml)")
	addFormatFlag(cmd, &format, "text", "json", "yaml")
	return cmd
}
