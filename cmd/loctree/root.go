package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// run executes the command line and returns the process exit status: 0 on
// success, 1 on errors, or the status an exitError asks for.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintf(stderr, "loctree: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "loctree: %v\n", err)
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "loctree",
		Short: "Locality-aware load balancing from one encoded tree",
		Long: `loctree turns a service's endpoints and their localities into one compact
encoded tree, and answers "where does traffic from this locality go" in a few
memory reads: in Go, in a proxy-wasm filter for Envoy/Istio, and in eBPF
programs on the node's socket hooks.

Without -f, commands use the embedded example mesh (examples/mesh.yaml).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "-", // --version prints versionInfo (the template below)
	}
	root.SetVersionTemplate(buildVersion().String())
	root.AddCommand(newVersionCmd())
	root.AddCommand(newTreeCmd())
	root.AddCommand(newAgentCmd())

	root.AddCommand(newWasmCmd())
	root.AddCommand(newIstioCmd())
	root.AddCommand(newDemoCmd())
	return root
}
