package main

import "github.com/spf13/cobra"

func newTreeCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "tree",
		Short: "Build, validate, inspect and query locality trees",
	})
	cmd.AddCommand(newTreeBuildCmd(), newTreeValidateCmd(), newTreeInspectCmd(), newTreePickCmd())
	return cmd
}
