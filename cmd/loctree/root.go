package main

import "github.com/spf13/cobra"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "loctree",
		Short:         "Locality-aware load balancing from one encoded tree",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newWasmCmd())
	return root
}
