package main

import (
	"github.com/spf13/cobra"

	"github.com/loctree/loctree/istio/render"
)

func newIstioCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "istio",
		Short: "Istio objects for loctree, and a check of a node's agent and filters",
	})
	cmd.AddCommand(newIstioRenderCmd(), newIstioCheckCmd())
	return cmd
}

func newIstioRenderCmd() *cobra.Command {
	var (
		o        render.Options
		steering string
		format   string
	)
	cmd := &cobra.Command{
		Use:   "render --service NAME.NS --port N",
		Short: "Print the Istio objects that put one service under loctree",
		Long: `Print, for one service port, the objects that put it under loctree:
the mesh-wide WasmPlugin, a server-side-apply patch that opts the Service in,
the EnvoyFilter that puts Envoy's OverrideHost load-balancing policy on its
outbound clusters (--steering override-host, the default) or the
istio.io/persistent-session-header label (--steering persistent-session), and
a DestinationRule with outlier detection. They are built from the official Go
types (istio.io/client-go, k8s.io/api, go-control-plane).

Examples:
  loctree istio render --service reviews.default --port 9080 --wasm-url oci://REGISTRY/loctree-wasm@sha256:DIGEST
  loctree istio render --service reviews.default --port 9080 --wasm-url URL --steering persistent-session -o json
  loctree istio render --service reviews.default --port 9080 --wasm-url URL | kubectl apply --server-side -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, render.FormatYAML, render.FormatJSON); err != nil {
				return err
			}
			o.Steering = render.Steering(steering)
			objs, err := render.Render(o)
			if err != nil {
				return err
			}
			return render.Write(cmd.OutOrStdout(), objs, format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Service, "service", "", "the service, as NAME.NAMESPACE (required)")
	f.Uint32Var(&o.Port, "port", 0, "the service port (required)")
	f.StringVar(&o.WasmURL, "wasm-url", "", "URL of the filter module (oci://, http://, https:// or file://; pin oci:// by digest) (required)")
	f.StringVar(&steering, "steering", string(render.SteeringOverrideHost), "override-host or persistent-session")
	f.StringVar(&o.Domain, "domain", render.DefaultDomain, "cluster DNS domain")
	addFormatFlag(cmd, &format, render.FormatYAML, render.FormatJSON)
	_ = cmd.RegisterFlagCompletionFunc("steering", cobra.FixedCompletions(
		[]string{string(render.SteeringOverrideHost), string(render.SteeringPersistentSession)}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagRequired("service")
	_ = cmd.MarkFlagRequired("port")
	_ = cmd.MarkFlagRequired("wasm-url")
	return cmd
}
