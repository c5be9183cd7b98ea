package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

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

// groupCmd makes cmd, a command that groups subcommands, answer as
// kubectl does: alone it prints its help; with an unknown subcommand it
// fails with cobra's "did you mean" suggestions (cobra does that only for
// the root command; a non-runnable child prints its help and exits 0).
func groupCmd(cmd *cobra.Command) *cobra.Command {
	cmd.Args = noSubcommand
	if cmd.RunE == nil {
		cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	return cmd
}

// noSubcommand refuses arguments, naming the nearest subcommands of cmd
// (cobra.Command.SuggestionsFor) when the first reads as a misspelt one.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		b.WriteString("\n\nDid you mean this?\n")
		for _, name := range s {
			fmt.Fprintf(&b, "\t%s\n", name)
		}
	}
	fmt.Fprintf(&b, "\nRun '%s --help' for usage.", cmd.CommandPath())
	return errors.New(b.String())
}
