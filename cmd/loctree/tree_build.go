package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

type treeBuildOptions struct {
	file       string
	out        string
	format     string
	generation uint64
}

func newTreeBuildCmd() *cobra.Command {
	var o treeBuildOptions
	cmd := &cobra.Command{
		Use:   "build [-f TOPOLOGY|DIR] --out TREE",
		Short: "Encode a topology into a tree blob",
		Long: `Build validates a topology (YAML or JSON) and writes its encoded tree: the
byte layout of docs/FORMAT.md that the agent, the filter and the kernel read.
-f takes a file or a directory of topology files (*.json, *.yaml, *.yml), read
as loctree agent -f reads it. The same topology and generation always give
the same bytes. -o is the format of the summary it prints, as everywhere in
loctree. To check a topology without writing a tree, use loctree tree validate.

Examples:
  loctree tree build --out tree.bin
  loctree tree build -f examples/mesh.yaml --out tree.bin --generation 7 -o json
  loctree tree build -f /etc/loctree/topology.d --out tree.bin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTreeBuild(cmd, &o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "topology file or directory of them (default: the embedded examples/mesh.yaml)")
	cmd.Flags().StringVar(&o.out, "out", "", "file to write the encoded tree to (required)")
	cmd.Flags().Uint64Var(&o.generation, "generation", 1, "generation written into the header")
	addFormatFlag(cmd, &o.format, "text", "json", "yaml")
	return cmd
}

// buildSummary is the -o json|yaml shape of build and validate.
type buildSummary struct {
	Out        string `json:"out,omitempty"`
	Topology   string `json:"topology"`
	Generation uint64 `json:"generation"`
	Services   int    `json:"services"`
	Endpoints  int    `json:"endpoints"`          // every endpoint
	Eligible   int    `json:"eligible_endpoints"` // those the tree routes to
	Nodes      int    `json:"nodes"`
	Bytes      int    `json:"bytes"`
}

func runTreeBuild(cmd *cobra.Command, o *treeBuildOptions) error {
	if err := checkFormat(o.format, "text", "json", "yaml"); err != nil {
		return fmt.Errorf("-o is the output format (text, json or yaml); write the tree with --out %s", o.format)
	}
	if o.out == "" {
		return fmt.Errorf(`required flag(s) "out" not set: where to write the tree (to check a topology without one: loctree tree validate)`)
	}
	t, name, err := buildTopology(o.file, o.generation, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, t.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write tree: %w", err)
	}
	sum := summarize(t, name)
	sum.Out = o.out
	if isData(o.format) {
		return writeData(cmd.OutOrStdout(), o.format, sum)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s\n", sum.Out, sum.text())
	return nil
}

// buildTopology reads and builds the topology at path ("" : the embedded
// example mesh), a file or a directory, and prints its warnings to stderr.
func buildTopology(path string, generation uint64, stderr io.Writer) (*shared.Tree, string, error) {
	top, name, err := topology.LoadOrDefault(path)
	if err != nil {
		return nil, "", err
	}
	t, ws, err := buildWarned(top, name, generation)
	if err != nil {
		return nil, "", err
	}
	printWarnings(stderr, name, ws)
	return t, name, nil
}

func summarize(t *shared.Tree, name string) buildSummary {
	return buildSummary{Topology: name, Generation: t.Generation(), Services: t.NumServices(),
		Endpoints: endpointCount(t), Eligible: eligibleCount(t), Nodes: int(t.NumNodes()), Bytes: len(t.Bytes())}
}

func (s buildSummary) text() string {
	return fmt.Sprintf("generation %d, %d services, %d endpoints (%d eligible), %d nodes, %d bytes",
		s.Generation, s.Services, s.Endpoints, s.Eligible, s.Nodes, s.Bytes)
}
