package main

import "github.com/spf13/cobra"

func newTreeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Build, inspect and query locality trees",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTreeBuildCmd(), newTreeInspectCmd(), newTreePickCmd())
	return cmd
}
