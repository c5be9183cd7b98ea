package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

type treeBuildOptions struct {
	file       string
	out        string
	generation uint64
}

func newTreeBuildCmd() *cobra.Command {
	var o treeBuildOptions
	cmd := &cobra.Command{
		Use:   "build [-f TOPOLOGY] -o TREE",
		Short: "Encode a topology file into a tree blob",
		Long: `Build validates a topology (YAML or JSON) and writes its encoded tree: the
byte layout of docs/FORMAT.md that the agent, the filter and the kernel read.
The same topology and generation always give the same bytes.

Examples:
  loctree tree build -o tree.bin
  loctree tree build -f mesh.yaml -o tree.bin --generation 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTreeBuild(cmd, &o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "topology file (default: the embedded examples/mesh.yaml)")
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "where to write the tree (required)")
	cmd.Flags().Uint64Var(&o.generation, "generation", 1, "generation written into the header")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func runTreeBuild(cmd *cobra.Command, o *treeBuildOptions) error {
	top, name, err := topology.LoadOrDefault(o.file)
	if err != nil {
		return err
	}
	t, err := shared.Build(top, shared.BuildOptions{Generation: o.generation})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.WriteFile(o.out, t.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write tree: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: generation %d, %d services, %d endpoints, %d nodes, %d bytes\n",
		o.out, t.Generation(), len(t.Services()), t.NumEndpoints(), t.NumNodes(), len(t.Bytes()))
	return nil
}
